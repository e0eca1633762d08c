"""VIBoost as a scikit-learn classifier (Algorithm 1 of Lorbert, Blei, Schapire and Ramadge).

This module owns the scikit-learn plumbing only: parameters and their validation, the fitted
attributes, pickling and the predictions. ``fit`` validates the data, resolves the preset
(:mod:`viboost.presets`; the resolved plan is the fitted attribute ``plan_``), builds the fit's
one learner search over the binned rows, and hands the rounds to the engine:

- ``noise_fit="in-sample"`` (the paper preset): a :class:`~viboost.boosting.booster.Booster`
  runs Algorithm 1's rounds on all rows (search, :func:`~viboost.variational.run_round`,
  reweight, record), with the noise model fitted by each round's inner loop;
- ``noise_fit="cross-fit"`` (the robust preset): the driver
  :class:`~viboost.noise_fit.cross_fit.CrossFitter` runs fold boosters in lockstep, chooses the
  number of rounds and calibrates the noise model on their out-of-fold margins
  (:mod:`viboost.noise_fit.calibration`), and refits on every row counted ``s_n phi_n`` times.

Between rounds q(w) is held as a function of the margin
(:class:`~viboost.variational.CleanLogOdds`), so no per-row phi is stored; ``clean_proba_`` is
computed from it at the end of ``fit``. Prediction is ``sign(H)`` and ``predict_proba`` is
``sigmoid(H)``: the model's probability of the *true* label (section 2), not of a label that may
have been corrupted by the noise process.
"""

from __future__ import annotations

import warnings
from collections.abc import Iterator
from dataclasses import asdict, replace
from numbers import Integral, Real

import numpy as np
from scipy.special import expit, log_expit, log_softmax, softmax
from sklearn.base import BaseEstimator, ClassifierMixin
from sklearn.utils._param_validation import Interval, StrOptions
from sklearn.utils.multiclass import check_classification_targets
from sklearn.utils.validation import _check_sample_weight, check_is_fitted, validate_data

from viboost._utils.parallel import fit_threads, kernel_threads, numba_threads
from viboost._utils.validation import check_classes, check_pair, reject_non_numeric_columns
from viboost._version import __version__
from viboost.boosting.booster import Booster, BoosterRecords, InMemoryRows, run_rounds
from viboost.boosting.learners import LearnerSearch
from viboost.boosting.predictor import predict_ensemble
from viboost.boosting.softmax import SoftmaxRows
from viboost.boosting.stumps import BinnedStumpSearch, ExactStumpSearch
from viboost.boosting.tree_search import TreeSearch
from viboost.noise_fit.calibration import flip_rates_from_mislabel, mislabel_proba_in_sample
from viboost.noise_fit.channel_calibration import ClassChannelCalibration
from viboost.noise_fit.class_calibration import joint_of
from viboost.noise_fit.cross_fit import (
    CrossFitResult,
    CrossFitter,
    MakeRows,
    cross_fit_folds,
)
from viboost.presets import PRESETS, FitPlan, resolve_preset
from viboost.variational import ModelPriors, RoundSettings, VariationalState, initial_state

__all__ = ["VIBoostClassifier", "ViboostVersionWarning"]


class ViboostVersionWarning(UserWarning):
    """A model is loaded with a viboost version other than the one that saved it."""


class VIBoostClassifier(ClassifierMixin, BaseEstimator):
    """VIBoost: boosting by stagewise variational inference in a model of label noise.

    Each label is *true* with probability theta, drawn from the logistic model of the ensemble
    ``H = sum_t alpha_t h_t``, or *noisy*, drawn with a fixed log-odds xi (the noise grade)
    regardless of ``x`` (section 4). With K > 2 classes, a true label is drawn from the softmax
    of K ensembles ``F_k`` (one tree per class per round, :mod:`viboost.boosting.softmax`) and a
    noisy one from pi, a distribution over the classes with a Dirichlet prior (the K-class form
    of xi, :mod:`viboost.noise_fit.class_calibration`); K-class fits are cross-fitted. Each
    round adds one base learner (a stump, or a tree per class) and updates the posterior of its
    weight (Algorithm 1). Besides the classifier, the fit returns the noise
    statistics of section 7: the signal-to-noise ratio ``eta_1 / eta_2``, the noise grade
    ``log(omega_2 / omega_1)`` and, per training row, the posterior probability ``phi_n`` that
    its label is true; and the share of wrong labels, with a credible interval.

    Two presets (:mod:`viboost.presets`; explicitly set parameters always win):

    - ``"robust"`` (default): boosters with shrinkage (``learning_rate=0.2``) and the exact mode
      of q(c) are cross-fitted on ``cv`` folds; their out-of-fold margins choose the number of
      rounds (at most ``n_estimators=1000``) and calibrate theta, xi and the scale of ``H`` by
      the model's marginal likelihood, which gives every row a calibrated ``phi_n``; the final
      ensemble is fitted on all rows, each counted ``s_n phi_n`` times (S.4.1 under that q(w)).
      More accurate than the paper's settings on noisy labels, and its noise statistics are
      calibrated (``benchmarks/label_noise.md``).
    - ``"paper"``: Algorithm 1 as printed (100 rounds, the approximate mode of eq. (17), the
      noise model fitted in-sample by the inner variational loop), bit for bit as viboost fitted
      it before the robust preset existed; ``viboost reproduce`` uses it. Its noise statistics
      rank rows but are not calibrated (theta runs to 1 on noisy labels).

    Parameters
    ----------
    n_estimators : int or None, default=None
        Number of boosting rounds T (one stump per round); with cross-fitting, the most rounds
        tried (when the count chosen is this cap, ``fit`` warns with a
        :class:`~sklearn.exceptions.ConvergenceWarning`) and the most the refit runs (it runs
        the chosen count times its share of the rows over a fold booster's, 1.25 with
        5 folds; ``cv_best_rounds_``). None: from the preset (robust: 1000, paper: 100).
    preset : {"robust", "paper"}, default="robust"
        Fills in the parameters left at None: ``n_estimators``, ``learning_rate``, ``alpha``
        and ``noise_fit`` (see above).
    learning_rate : float or None, default=None
        Shrinkage: round t adds ``learning_rate * alpha_t h_t`` to ``H``. None: from the preset
        (robust: 0.2, paper: 1).
    weight_prior : float, default=1.0
        mu_0: multiplicity of the prior v-Log([+1,-1], [0,0], mu_0) on each stump weight. Larger
        values shrink the weights more (the 1/Z term of section 6 eq. (18)); near 0 the core
        model is discrete AdaBoost.
    noise_grade_prior : float, default=1.0
        mu_0': multiplicity of the prior v-Log([+1,-1], [0,0], mu_0') on the noise grade xi.
    clean_prior : pair of float, default=(1.0, 1.0)
        zeta = (zeta_1, zeta_2): the Beta prior on theta, the probability that a label is true.
    tau : float, default=1.0
        Tail parameter of the approximate mode (section 5 eq. (17)); 1 is the closest to AdaBoost.
    init_clean_proba : float, default=1.0
        Initial phi_n, the probability that each training label is true.
    init_eta : pair of float, default=(1.0, 1.0)
        Initial (eta_1, eta_2), the Beta posterior of theta used by the first phi update.
    noise_model : bool, default=True
        False fits the core model of section 2 (every label true, phi_n = 1, no inner loop): the
        smoothed AdaBoost of section 6.
    alpha : {"approx", "exact"} or None, default=None
        How alpha_t is taken from q(c): the closed-form approximate mode of eq. (17) (the
        paper's choice) or the exact mode of the v-Log posterior. None: from the preset
        (robust: "exact", paper: "approx"). Stumps are ranked to match:
        by the approximate mode (least weighted error under ``phi exp(-tau y H)``, section 5), or
        by one Newton step towards the exact mode (least weighted error under
        ``phi sigmoid(-y H)``); ranking by the first but stepping by the second stalls, as the
        exact step along an exp-loss pick is often near zero.
    noise_fit : {"cross-fit", "in-sample"} or None, default=None
        How the noise model is fitted. ``"in-sample"``: Algorithm 1's inner variational loop
        in every round. ``"cross-fit"``: from out-of-fold margins (see above); the rounds
        themselves then run the core model. None: from the preset (robust: "cross-fit", paper:
        "in-sample"). If a class has fewer than 2 rows, "cross-fit" falls back to "in-sample"
        with a warning.
    cv : int, "auto", cross-validation generator or iterable, default="auto"
        The folds of ``noise_fit="cross-fit"``. An int: that many stratified folds (fewer if a
        class has fewer rows), shuffled by ``random_state``. ``"auto"``: 5 such folds, or from
        250,000 rows of positive weight on the fewest (at least 2) whose boosters each train on
        200,000 rows or more (2 from 400,000 rows:
        :func:`~viboost.noise_fit.cross_fit.auto_fold_count`); the number used is
        ``cv_n_splits_``. A splitter or an iterable of
        (train, validation) index arrays is used as given, as in scikit-learn; rows in no
        validation fold get the final ensemble's margin.
    n_iter_no_change : int or None, default=30
        With cross-fitting: stop once the out-of-fold log-likelihood (scored every 10 rounds)
        has not risen significantly for this many rounds (by more than 1e-5 nats per unit of
        sample weight, and at least 0.1% of the score's size, plus one standard error of the
        rise, paired over the rows: :class:`~viboost.noise_fit.cross_fit.RoundCountSearch`);
        the round count of the highest score is chosen (``cv_best_rounds_``). None tries all
        ``n_estimators``.
    tol : float, default=1e-8
        The inner loop stops once an iteration raises the ELBO by at most ``tol * |ELBO|``
        (a fall also stops it; falls are recorded, see ``elbo_``).
    max_vi_iter : int, default=100
        Cap on inner iterations per round when the ELBO decides.
    fixed_vi_iter : int or None, default=None
        The paper's modification (a): run exactly this many inner iterations per round and
        compute no ELBO (for the core model too). None lets the ELBO decide.
    update_alpha_once : bool, default=False
        The paper's modification (b): set alpha_t at the first inner iteration and keep it.
    warm_start : bool, default=False
        When True, ``fit`` on the same training data continues the previous run up to the new
        ``n_estimators``, with the same result as one longer run.
    max_bins : int or None, default=255
        Features are binned once per fit into at most ``max_bins`` bins (plus one for missing
        values) and stumps are searched over bin boundaries with a compiled histogram kernel
        (:class:`~viboost.boosting.stumps.BinnedStumpSearch`). A feature with at most ``max_bins``
        distinct values is binned exactly, so the stumps are those of the exhaustive search;
        otherwise its thresholds are quantiles. Thresholds are in the units of ``X``. None uses
        the exhaustive search over all distinct values
        (:class:`~viboost.boosting.stumps.ExactStumpSearch`; stumps only).
    max_leaf_nodes : int or None, default=None
        Most leaves of each round's tree (scikit-learn HGB's name), grown best-first
        (:mod:`viboost.boosting.trees`). None: the preset's, 8 for ``"robust"`` and 2 for
        ``"paper"``, whose 2-leaf tree with tied leaves is the paper's decision stump.
    max_depth : int or None, default=None
        Most splits from a tree's root to a leaf; None for no limit (on the paper preset, a
        depth asks for trees of up to ``2 ** max_depth`` leaves).
    min_samples_leaf : int or None, default=None
        Fewest training rows in a leaf, each counted as its sample weight (a row of weight k
        counts as its k copies would; rows of weight 0 not at all). None: for ``"robust"`` 20,
        or ``n_rows / (2 max_leaf_nodes)`` when that is fewer, so that a full tree remains
        possible on small data (:func:`viboost.presets.auto_min_samples_leaf`); 1 for
        ``"paper"``.
    leaf_weights : {"per-leaf", "tied"} or None, default=None
        ``"per-leaf"``: each leaf is a base classifier with its own weight and its own v-Log
        posterior (the rows of the leaf, S.4.1), its value the posterior's mode, and the tree is
        added times ``learning_rate``; a fit starts with an intercept (a one-leaf tree).
        ``"tied"``: Algorithm 1 as printed, one weight per tree, leaves labelled +-1 by their
        weighted majority. None: ``"per-leaf"`` for ``"robust"``, ``"tied"`` for ``"paper"``.
    noise_channel : {"auto", "independent", "class-conditional"}, default="auto"
        K > 2 classes: how a label is corrupted. ``"independent"``: the paper's model, a noisy
        label drawn from one distribution pi whatever the true class. ``"class-conditional"``:
        a full noise matrix ``P(given j | true i)``, each column with a Dirichlet prior (noise
        that mistakes one class for one other; :mod:`viboost.noise_fit.channel_calibration`).
        ``"auto"``: both are fitted to the out-of-fold margins and the one of the higher log
        evidence is kept (``noise_channel_`` says which). For two classes the
        paper's channel is already the general one and this is ignored.
    mislabeled : {"weight", "drop"}, default="weight"
        With cross-fitting: what the final booster does with the rows whose labels are likely
        wrong. ``"weight"``: it fits every row, counted ``s_n phi_n`` times (S.4.1 under the
        calibrated q(w), the paper's update). ``"drop"``: it leaves out the rows whose label is
        more likely wrong than right (``phi_n <= 1/2``, the most probable w_n), as
        CleanLearning drops its label issues, and fits the others counted ``s_n`` times. A refit
        without the wrong labels overfits later than the fold boosters fitted to them, so its
        round count comes from a second search, by the boosters of two of the folds fitted
        without the flagged rows (when these carry 1% of the weight or more); the noise
        statistics stay those of the first pass, fitted to every label. ``refit_weight_``
        holds each row's weight in the final booster
        (:meth:`~viboost.noise_fit.cross_fit.CrossFitter.fit`). Measured on K classes
        (``docs/multiclass.md``): more accurate where the one-pass search stops within a few
        dozen rounds on noisy labels (Satellite with 10-30% of the labels moved, digits with
        20%), less where it does not (digits with 10%, DNA, pairwise noise), and 1.1-2.1
        times the time.
    final_model : {"refit", "fold-average"}, default="refit"
        With cross-fitting: what is fitted once the noise model is calibrated. ``"refit"``: one
        booster on every row (counted as ``mislabeled`` says) for the chosen round count
        scaled to all the rows. ``"fold-average"``: one such booster per fold, each on its
        fold's training rows for the chosen count (the count that the search chose for
        boosters of that size), and the model is the average of their margins (bagging over
        the folds; ``estimators_`` holds every booster's learners, round by round, each weight
        divided by the number of folds). It costs about ``(cv - 1)**2 / cv`` times a refit (3.2
        with 5 folds; 1.0-1.5 times the whole fit on DNA and Satellite); measured on K
        classes (``docs/multiclass.md``), it is the more accurate on Satellite in every setting
        (by 1.2 points under pairwise noise), mixed on DNA; on two classes (Spambase,
        binarised Satellite) as good or up to 0.24 points better.
    n_jobs : int or None, default=None
        Threads for the compiled (numba) kernels of ``fit`` and of the predictions, with
        scikit-learn's meaning: None means 1 unless in a :func:`joblib.parallel_config` context,
        -1 means all cores; at most ``numba.config.NUMBA_NUM_THREADS``. Small calls (fewer than
        about a million rows x features in ``fit``, rows x stumps in a prediction) run on one
        thread whatever ``n_jobs``. The count is set for the duration of the call only, and
        the results are bit-identical for every ``n_jobs``.
    random_state : int, RandomState instance or None, default=None
        Seeds the cross-fitting folds, the draws of the credible intervals and the row
        subsample (at most 200,000 rows) from which quantile bin edges are taken. Pass an int
        for reproducible fits.
    verbose : int, default=0
        1 or more shows a progress bar on stderr for fits that last over two seconds.

    Attributes
    ----------
    estimators_ : list of BaseLearner
        The base learners h_t (:class:`~viboost.boosting.learners.BaseLearner`): stumps
        (feature, threshold in the units of X, polarity, side of missing values) or trees. For
        K > 2 classes, one list of K learners per round (class k's at position k), as
        scikit-learn's HGB keeps its predictors. With ``final_model="fold-average"``, the
        learners of every fold booster, round ``t`` of each fold before round ``t + 1`` of any
        (``alphas_`` divided by the number of folds: the margins are the folds' average).
    plan_ : FitPlan
        The settings this fit used (:mod:`viboost.presets`): the preset's values with those set
        explicitly, and ``noise_fit`` after any fallback to "in-sample".
    alphas_ : ndarray of shape (n_rounds,) or (n_rounds, n_classes)
        The learners' weights alpha_t (per class for K > 2 classes).
    snr_ : float
        Signal-to-noise ratio ``eta_1 / eta_2`` (section 4, S.2). NaN when ``noise_model=False``.
    noise_grade_ : float
        ``log(omega_2 / omega_1)``, the mode of q(xi): the log-odds of a +1 among noisy labels.
        NaN when ``noise_model=False``, and for K > 2 classes (see ``omega_``).
    clean_proba_ : ndarray of shape (n_samples,)
        phi_n: posterior probability that training label n is true (1 - phi_n: that it is noise;
        a noisy label is still right when the coin of the noise process agrees with the truth).
        Calibrated when cross-fitted: its sum estimates the number of labels drawn from the
        signal model, N theta.
    mislabel_proba_ : ndarray of shape (n_samples,)
        Posterior probability that training label n differs from the row's true class,
        ``(1 - phi_n) sigmoid(-y_n F_n)``; calibrated when cross-fitted, a ranking otherwise.
        Zeros without the noise model.
    noise_rate_ : float
        Estimated share of wrong training labels: the (weighted) mean of ``mislabel_proba_``.
    noise_rate_interval_ : ndarray of shape (2,)
        90% credible interval of ``noise_rate_`` (Laplace approximation of the calibration's
        posterior); NaN when not cross-fitted.
    flip_rates_ : ndarray of shape (n_classes,)
        ``flip_rates_[k]``: estimated share of the rows of true class ``classes_[k]`` that carry
        another label (for two classes, the binary channel of S.2).
    flip_rates_interval_ : ndarray of shape (n_classes, 2)
        90% credible intervals of ``flip_rates_``, one row per class; NaN when not cross-fitted.
    true_class_proba_ : ndarray of shape (n_samples, n_classes)
        Per training row, the posterior probability of each true class given its label (columns
        in the order of ``classes_``); ``1 - mislabel_proba_`` at the given label. Calibrated
        when cross-fitted.
    label_joint_ : ndarray of shape (n_classes, n_classes)
        The expected joint distribution of given labels (rows) and true classes (columns) over
        the training rows (the sums of ``true_class_proba_``, weighted), the counterpart of
        cleanlab's ``estimate_joint``; NaN without the noise model.
    noise_matrix_ : ndarray of shape (n_classes, n_classes)
        ``P(given label i | true class j)`` at ``[i, j]`` (cleanlab's orientation: each column
        sums to 1): ``label_joint_`` with its columns normalised.
    noise_channel_ : str
        K > 2 classes: the channel the fit kept, ``"independent"`` or ``"class-conditional"``
        (see ``noise_channel``). Two classes: ``"independent"``.
    refit_weight_ : ndarray of shape (n_samples,)
        With cross-fitting, each training row's multiplicity in the final booster:
        ``s_n phi_n``, or with ``mislabeled="drop"`` ``s_n`` for the rows kept and 0 for the
        rows left out (see ``mislabeled``). None for in-sample fits.
    cv_n_passes_ : int
        With cross-fitting, how many times the fold boosters were fitted: 2 when
        ``mislabeled="drop"`` fitted them again without the flagged rows (``cv_rounds_``,
        ``cv_log_likelihood_`` and ``cv_best_rounds_`` then describe that second search;
        ``noise_calibration_``, ``cv_decision_function_`` and the noise statistics the first
        pass), else 1; 0 for in-sample fits.
    noise_calibration_ : NoiseCalibration, ClassNoiseCalibration or None
        The cross-fitted calibration (theta, xi, the scale of ``H``, their Laplace covariance;
        for K > 2 classes theta, pi and the scale); None for in-sample fits and the core
        model.
    cv_rounds_, cv_log_likelihood_ : ndarray
        The round counts scored while cross-fitting and the out-of-fold marginal log-likelihood
        of the labels at each (the logistic log-likelihood for the core model); empty when not
        cross-fitted.
    cv_best_rounds_ : int
        The round count chosen by cross-fitting (the fold boosters' best); the final ensemble
        has that many times the refit's share of the weight over a fold booster's (1.25 with
        5 folds, 2 with 2; :func:`~viboost.noise_fit.cross_fit.refit_round_count`), at most
        ``n_estimators``. 0 when not cross-fitted.
    cv_n_splits_ : int
        The number of folds cross-fitted (``cv="auto"``: 5, fewer from 250,000 rows); 0 when
        not cross-fitted.
    cv_decision_function_ : ndarray of shape (n_samples,) or (n_samples, n_classes)
        The out-of-fold ``H`` (``F`` for K > 2 classes) of each training row at the chosen round
        count (for rows of zero weight, the final ensemble's); NaN when not cross-fitted.
    eta_ : ndarray of shape (2,)
        Parameters of the Beta posterior q(theta). NaN when ``noise_model=False``.
    omega_ : ndarray of shape (2,) or (n_classes,)
        Multiplicities of the v-Log posterior q(xi); for K > 2 classes, the parameters of the
        Dirichlet posterior q(pi) of the noisy-label distribution (``omega_ / omega_.sum()`` is
        its mean). NaN when ``noise_model=False``.
    elbo_ : list of ndarray
        Per round, the dynamic ELBO (S.5) of that round's model before its first inner iteration
        and after each one; it may fall, as the paper notes. For rounds of the core model
        (``noise_model=False``, and the final fit of a cross-fitted one, with multiplicities
        ``s_n phi_n``), the exact log evidence ``log p(y | H, h_t)``. Empty arrays with
        ``fixed_vi_iter``, and for K > 2 classes (per round a list of one empty array per
        class: nothing reads a K-class refit's per-round evidence, so it is not computed).
    n_vi_iter_ : ndarray of shape (n_rounds,) or (n_rounds, n_classes)
        Inner iterations run in each round (per class for K > 2 classes).
    snr_path_, noise_grade_path_ : ndarray of shape (n_rounds,)
        ``snr_`` and ``noise_grade_`` after each round of the in-sample loop; NaN when
        cross-fitted (the noise model is fitted once, after the rounds).
    classes_ : ndarray of shape (n_classes,)
        Class labels; for two classes ``classes_[1]`` is the positive class (+1 in the paper).
    n_features_in_ : int
        Number of features seen at fit.
    feature_names_in_ : ndarray of shape (n_features_in_,)
        Column names, when X is a DataFrame with string column names.

    See Also
    --------
    sklearn.ensemble.AdaBoostClassifier : discrete AdaBoost, the model's limit without noise.

    References
    ----------
    .. [1] A. Lorbert, D. M. Blei, R. E. Schapire and P. J. Ramadge, "A Bayesian Boosting Model",
       arXiv:1209.1996, 2012.

    Examples
    --------
    >>> import numpy as np
    >>> from viboost import VIBoostClassifier
    >>> rng = np.random.default_rng(0)
    >>> X = rng.normal(size=(200, 3))
    >>> y = (X[:, 0] > 0).astype(int)
    >>> flip = rng.random(200) < 0.1
    >>> y[flip] = 1 - y[flip]
    >>> clf = VIBoostClassifier(random_state=0).fit(X, y)
    >>> clf.score(X, y) > 0.85
    True
    >>> bool(clf.mislabel_proba_[flip].mean() > clf.mislabel_proba_[~flip].mean())
    True
    >>> lo, hi = clf.noise_rate_interval_  # the share of wrong labels, with 90% interval
    >>> bool(lo < clf.noise_rate_ < hi)
    True
    >>> paper = VIBoostClassifier(20, preset="paper").fit(X, y)  # Algorithm 1 as printed
    >>> y3 = np.digitize(X[:, 0], [-0.5, 0.5])  # three classes
    >>> clf3 = VIBoostClassifier(random_state=0).fit(X, y3)
    >>> clf3.predict_proba(X).shape, clf3.noise_matrix_.shape
    ((200, 3), (3, 3))
    """

    _parameter_constraints: dict = {
        "n_estimators": [Interval(Integral, 1, None, closed="left"), None],
        "preset": [StrOptions(set(PRESETS))],
        "learning_rate": [Interval(Real, 0, None, closed="neither"), None],
        "weight_prior": [Interval(Real, 0, None, closed="neither")],
        "noise_grade_prior": [Interval(Real, 0, None, closed="neither")],
        "clean_prior": ["array-like"],
        "tau": [Interval(Real, 0, None, closed="neither")],
        "init_clean_proba": [Interval(Real, 0, 1, closed="right")],
        "init_eta": ["array-like"],
        "noise_model": ["boolean"],
        "alpha": [StrOptions({"approx", "exact"}), None],
        "noise_fit": [StrOptions({"cross-fit", "in-sample"}), None],
        "cv": [Interval(Integral, 2, None, closed="left"), StrOptions({"auto"}), "cv_object"],
        "n_iter_no_change": [Interval(Integral, 1, None, closed="left"), None],
        "tol": [Interval(Real, 0, None, closed="left")],
        "max_vi_iter": [Interval(Integral, 1, None, closed="left")],
        "fixed_vi_iter": [Interval(Integral, 1, None, closed="left"), None],
        "update_alpha_once": ["boolean"],
        "warm_start": ["boolean"],
        "max_bins": [Interval(Integral, 2, 255, closed="both"), None],
        "max_leaf_nodes": [Interval(Integral, 2, None, closed="left"), None],
        "max_depth": [Interval(Integral, 1, None, closed="left"), None],
        "min_samples_leaf": [Interval(Integral, 1, None, closed="left"), None],
        "leaf_weights": [StrOptions({"per-leaf", "tied"}), None],
        "noise_channel": [StrOptions({"auto", "independent", "class-conditional"})],
        "mislabeled": [StrOptions({"weight", "drop"})],
        "final_model": [StrOptions({"refit", "fold-average"})],
        "n_jobs": [Integral, None],
        "random_state": ["random_state"],
        "verbose": ["verbose"],
    }

    def __init__(
        self,
        n_estimators: int | None = None,
        *,
        preset: str = "robust",
        learning_rate: float | None = None,
        weight_prior: float = 1.0,
        noise_grade_prior: float = 1.0,
        clean_prior: tuple[float, float] = (1.0, 1.0),
        tau: float = 1.0,
        init_clean_proba: float = 1.0,
        init_eta: tuple[float, float] = (1.0, 1.0),
        noise_model: bool = True,
        alpha: str | None = None,
        noise_fit: str | None = None,
        cv: int | str = "auto",
        n_iter_no_change: int | None = 30,
        tol: float = 1e-8,
        max_vi_iter: int = 100,
        fixed_vi_iter: int | None = None,
        update_alpha_once: bool = False,
        warm_start: bool = False,
        max_bins: int | None = 255,
        max_leaf_nodes: int | None = None,
        max_depth: int | None = None,
        min_samples_leaf: int | None = None,
        leaf_weights: str | None = None,
        noise_channel: str = "auto",
        mislabeled: str = "weight",
        final_model: str = "refit",
        n_jobs: int | None = None,
        random_state: int | np.random.RandomState | None = None,
        verbose: int = 0,
    ) -> None:
        self.n_estimators = n_estimators
        self.preset = preset
        self.learning_rate = learning_rate
        self.weight_prior = weight_prior
        self.noise_grade_prior = noise_grade_prior
        self.clean_prior = clean_prior
        self.tau = tau
        self.init_clean_proba = init_clean_proba
        self.init_eta = init_eta
        self.noise_model = noise_model
        self.alpha = alpha
        self.noise_fit = noise_fit
        self.cv = cv
        self.n_iter_no_change = n_iter_no_change
        self.tol = tol
        self.max_vi_iter = max_vi_iter
        self.fixed_vi_iter = fixed_vi_iter
        self.update_alpha_once = update_alpha_once
        self.warm_start = warm_start
        self.max_bins = max_bins
        self.max_leaf_nodes = max_leaf_nodes
        self.max_depth = max_depth
        self.min_samples_leaf = min_samples_leaf
        self.leaf_weights = leaf_weights
        self.noise_channel = noise_channel
        self.mislabeled = mislabeled
        self.final_model = final_model
        self.n_jobs = n_jobs
        self.random_state = random_state
        self.verbose = verbose

    # ------------------------------------------------------------------ scikit-learn plumbing
    def __sklearn_tags__(self):
        tags = super().__sklearn_tags__()
        tags.input_tags.allow_nan = True
        # K classes are cross-fitted: Algorithm 1 as printed (in-sample) fits two.
        tags.classifier_tags.multi_class = self.noise_fit != "in-sample" and (
            self.noise_fit is not None or self.preset != "paper"
        )
        return tags

    def __getstate__(self) -> dict:
        state = super().__getstate__()
        state["_viboost_version"] = __version__
        return state

    def __setstate__(self, state: dict) -> None:
        saved = state.pop("_viboost_version", None)
        if saved != __version__:
            warnings.warn(
                f"This VIBoostClassifier was saved by viboost {saved or 'of unknown version'} and "
                f"is loaded by viboost {__version__}; it may predict differently or fail. "
                "Refit it with this version to be safe.",
                ViboostVersionWarning,
                stacklevel=2,
            )
        state.setdefault("n_jobs", None)  # models saved before n_jobs existed
        # Models saved before the presets were fitted by Algorithm 1 as printed.
        for name, value in (
            ("preset", "paper"),
            ("learning_rate", None),
            ("noise_fit", None),
            ("cv", 5),
            ("n_iter_no_change", 100),
            # Saved before trees: every base learner was a stump.
            ("max_leaf_nodes", 2),
            ("max_depth", None),
            ("min_samples_leaf", 1),
            ("leaf_weights", "tied"),
            ("noise_channel", "auto"),  # saved before K classes
            ("mislabeled", "weight"),  # saved before: every fit weighted its rows by phi
            ("final_model", "refit"),  # saved before: every cross-fit ended in one refit
        ):
            state.setdefault(name, value)
        super().__setstate__(state)
        if "_plan" in self.__dict__:  # viboost 0.1.0 kept the fit's plan privately
            self.plan_ = self.__dict__.pop("_plan")
        elif hasattr(self, "estimators_") and not hasattr(self, "plan_"):
            # Saved before any plan was kept: fitted by Algorithm 1 as printed.
            self.plan_ = resolve_preset(
                self.preset, self.n_estimators, self.learning_rate, self.alpha, "in-sample"
            )
        if hasattr(self, "cv_rounds_") and not hasattr(self, "cv_best_rounds_"):
            # Saved before the refit's rounds were scaled: it refitted the chosen count.
            self.cv_best_rounds_ = len(self.estimators_) if np.size(self.cv_rounds_) else 0
        if hasattr(self, "cv_rounds_") and not hasattr(self, "cv_n_splits_"):
            # Saved before cv="auto": an int cv (at most that many folds), or a splitter.
            crossed = np.size(self.cv_rounds_) and isinstance(self.cv, Integral)
            self.cv_n_splits_ = int(self.cv) if crossed else 0

    def _validate_X(self, X: object, reset: bool) -> np.ndarray:
        reject_non_numeric_columns(X)
        return validate_data(self, X, reset=reset, dtype=np.float64, ensure_all_finite="allow-nan")

    # ------------------------------------------------------------------ fitting
    def fit(self, X, y, sample_weight=None) -> VIBoostClassifier:
        """Fit the ensemble: rounds of Algorithm 1, cross-fitted or in-sample (see ``preset``).

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)
            Numeric features; NaN marks a missing value (infinite values are rejected).
        y : array-like of shape (n_samples,)
            Labels of two or more classes (K > 2 classes: cross-fitted, the robust preset).
        sample_weight : array-like of shape (n_samples,), default=None
            Nonnegative multiplicities: an integer weight k gives the same model as k copies of
            the row. They are not normalised, so their scale matters against the priors.

        Returns
        -------
        self : VIBoostClassifier
            The fitted estimator.
        """
        self._validate_params()
        clean_prior = check_pair("clean_prior", self.clean_prior)
        init_eta = check_pair("init_eta", self.init_eta)
        reject_non_numeric_columns(X)
        X, y = validate_data(
            self, X, y, dtype=np.float64, ensure_all_finite="allow-nan", reset=True
        )
        check_classification_targets(y)
        classes = np.unique(y)  # hashed for integer labels: fast on millions of rows
        check_classes(classes, type(self).__name__)
        sample_weight = _check_sample_weight(
            sample_weight, X, dtype=np.float64, ensure_non_negative=True
        )
        if classes.size > 2:
            self._fit_classes(X, y, classes, sample_weight, clean_prior, init_eta)
            return self
        y_index = (y == classes[-1]).astype(np.intp)
        y_signed = np.where(y_index == 1, 1.0, -1.0)
        weighted = sample_weight > 0
        if np.unique(y_signed[weighted]).size < 2:
            raise ValueError(
                "VIBoostClassifier needs both classes to carry positive sample weight; only "
                f"class {classes[int(y_signed[weighted][0] > 0)]!r} does."
            )

        plan = self._resolve_plan(float(sample_weight.sum()))
        if not plan.stumps and self.max_bins is None:
            raise ValueError(
                "max_bins=None (the exhaustive search) builds decision stumps only; trees "
                "(max_leaf_nodes > 2 or leaf_weights='per-leaf') need binned features: set "
                "max_bins, e.g. 255."
            )
        priors = self._model_priors(clean_prior)
        folds = None
        if plan.noise_fit == "cross-fit":
            if self.warm_start:
                raise ValueError(
                    "warm_start=True continues one run of rounds, but a cross-fitted fit "
                    "chooses its number of rounds from scratch; use noise_fit='in-sample' "
                    "(or preset='paper') to warm-start."
                )
            folds = cross_fit_folds(self.cv, y_signed, weighted, self.random_state)
            if folds is None:  # too few rows in a class (warned)
                plan = replace(plan, noise_fit="in-sample")

        # The kernels' threads for this call only; one thread below the work threshold.
        threads = kernel_threads(self.n_jobs, int(np.count_nonzero(weighted)) * X.shape[1])
        with fit_threads(threads):
            # One binning for the whole fit (as LightGBM's cv): every booster searches the same
            # candidate thresholds, from the weighted rows' values (no labels are used).
            search = self._learner_search(X, sample_weight, plan)
            if folds is None:
                self._fit_in_sample(
                    search, X, classes, y_signed, sample_weight, priors, plan, init_eta
                )
            else:
                result = self._cross_fitter(plan, priors, init_eta).fit(
                    _in_memory_rows(search, y_signed), y_signed, sample_weight, folds
                )
                self.classes_ = classes
                self._store_cross_fit(result, y_signed, sample_weight, priors)
        self._set_label_posteriors(y_index, sample_weight)
        self.plan_ = plan
        return self

    def _set_label_posteriors(self, y_index: np.ndarray, sample_weight: np.ndarray) -> None:
        """Two classes: ``true_class_proba_`` from ``mislabel_proba_``, then ``label_joint_``,
        ``noise_matrix_`` and ``noise_channel_`` (:meth:`_store_binary_joint`); also
        :class:`viboost.dask.DaskVIBoostClassifier`'s cross-fitted two-class fit."""
        self.true_class_proba_ = self._binary_true_class_proba(self.mislabel_proba_, y_index)
        self._store_binary_joint(self._label_joint(y_index, sample_weight))

    @staticmethod
    def _binary_true_class_proba(wrong: np.ndarray, y_index: np.ndarray) -> np.ndarray:
        """Two classes: each row's posterior of its true class (columns in the order of
        ``classes_``) from ``wrong``, the probability that its label is wrong (a wrong label's
        true class is the other one); also :class:`viboost.dask.DaskVIBoostClassifier`'s, block
        by block."""
        positive = np.where(y_index == 1, 1.0 - wrong, wrong)
        return np.column_stack([1.0 - positive, positive])

    def _label_joint(self, y_index: np.ndarray, sample_weight: np.ndarray) -> np.ndarray | None:
        """The joint of given labels (rows) and true classes (columns), as shares of the weight,
        from ``true_class_proba_``; None without the noise model."""
        if not self.noise_model:
            return None
        return joint_of(self.true_class_proba_, y_index, sample_weight)

    def _store_binary_joint(self, joint: np.ndarray | None) -> None:
        """Two classes: ``label_joint_`` and ``noise_matrix_`` (:meth:`_store_joint`) and
        ``noise_channel_``; also :class:`viboost.dask.DaskVIBoostClassifier`'s in-sample
        two-class fit, whose joint is summed over the blocks."""
        self._store_joint(joint)
        self.noise_channel_ = "independent"  # two classes: the paper's channel is the general one

    def _store_joint(self, joint: np.ndarray | None) -> None:
        """``label_joint_`` (``joint``; NaN where None: without the noise model) and
        ``noise_matrix_`` (its columns normalised)."""
        if joint is None:
            joint = np.full((self.classes_.size, self.classes_.size), np.nan)
        self.label_joint_ = joint
        with np.errstate(divide="ignore", invalid="ignore"):  # a class expected empty: NaN
            self.noise_matrix_ = joint / joint.sum(axis=0)

    def _fit_classes(
        self,
        X: np.ndarray,
        y: np.ndarray,
        classes: np.ndarray,
        sample_weight: np.ndarray,
        clean_prior: tuple[float, float],
        init_eta: tuple[float, float],
    ) -> None:
        """K > 2 classes: one ensemble per class (:mod:`viboost.boosting.softmax`), cross-fitted
        with the K-class noise model (:mod:`viboost.noise_fit.class_calibration`)."""
        n_classes = classes.size
        y_index = np.searchsorted(classes, y)
        weighted = sample_weight > 0
        counts = np.bincount(y_index[weighted], minlength=n_classes)
        plan = self._class_plan(classes, counts, float(sample_weight.sum()))
        priors = self._model_priors(clean_prior)
        folds = cross_fit_folds(self.cv, y_index, weighted, self.random_state)
        threads = kernel_threads(self.n_jobs, int(np.count_nonzero(weighted)) * X.shape[1])
        with fit_threads(threads):
            search = self._learner_search(X, sample_weight, plan)
            fitter = self._cross_fitter(plan, priors, init_eta, n_classes=n_classes)
            result = fitter.fit(
                _softmax_rows(search, y_index, n_classes), y_index, sample_weight, folds
            )
        self._store_class_fit(result, classes, y_index, sample_weight, priors, plan)

    def _class_plan(self, classes: np.ndarray, counts: np.ndarray, total_weight: float) -> FitPlan:
        """K > 2 classes: the fit's plan, after the checks of a K-class fit on ``counts``, the
        rows of positive weight of each class (also :class:`viboost.dask.DaskVIBoostClassifier`'s,
        from its blocks' summaries)."""
        name = type(self).__name__
        n_classes = classes.size
        if np.count_nonzero(counts) < 2:
            raise ValueError(
                f"{name} needs at least 2 classes with positive sample weight; only class "
                f"{_shown(classes[np.argmax(counts)])!r} has any."
            )
        plan = self._resolve_plan(total_weight)
        if plan.noise_fit == "in-sample":
            raise ValueError(
                "Only binary classification is supported with noise_fit='in-sample' "
                f"(preset='paper': Algorithm 1 as printed), and y has {n_classes} classes. "
                "K classes are fitted with the noise model cross-fitted (noise_fit='cross-fit', "
                "the robust preset)."
            )
        if not plan.stumps and self.max_bins is None:
            raise ValueError("max_bins=None builds decision stumps only; set max_bins, e.g. 255.")
        if self.warm_start:
            raise ValueError(
                "warm_start=True continues one run of rounds, but a cross-fitted fit (every "
                "K-class fit) chooses its number of rounds from scratch."
            )
        stratified = isinstance(self.cv, Integral) or (
            isinstance(self.cv, str) and self.cv == "auto"
        )
        lonely = (counts == 1) if stratified else np.zeros(n_classes, bool)
        if lonely.any():
            alone = _shown(classes[np.flatnonzero(lonely)[0]])
            raise ValueError(
                f"Class {alone!r} has a single training row of "
                "positive weight: the K-class noise model is cross-fitted and needs at least 2 "
                "rows per class (drop or relabel that row, or give it weight 0)."
            )
        return plan

    def _store_class_fit(
        self,
        result: CrossFitResult,
        classes: np.ndarray,
        y_index: np.ndarray,
        sample_weight: np.ndarray,
        priors: ModelPriors,
        plan: FitPlan,
    ) -> None:
        """K > 2 classes: the fitted attributes of a cross-fit (``y_index``: each row's index
        in ``classes``); also :class:`viboost.dask.DaskVIBoostClassifier`'s."""
        n_classes = classes.size
        self.classes_ = classes
        self._n_train = y_index.shape[0]
        self._priors = priors
        records = result.records
        n_rounds = len(records[0])
        self.estimators_ = [[r.learners[t] for r in records] for t in range(n_rounds)]
        self.alphas_ = np.column_stack([np.array(r.alphas, dtype=np.float64) for r in records])
        self.elbo_ = [[r.elbo[t] for r in records] for t in range(n_rounds)]
        self.n_vi_iter_ = np.column_stack([np.array(r.n_iter, dtype=int) for r in records])
        self.snr_path_ = np.full(n_rounds, np.nan)
        self.noise_grade_path_ = np.full(n_rounds, np.nan)
        self._store_search(result)
        self.noise_channel_ = (
            "class-conditional"
            if isinstance(result.calibration, ClassChannelCalibration)
            else "independent"
        )
        self.cv_decision_function_ = result.out_of_fold
        self.clean_proba_ = result.clean_proba
        self.noise_grade_ = float("nan")
        if result.calibration is None:  # core model: no noise statistics
            self.eta_ = np.full(2, np.nan)
            self.omega_ = np.full(n_classes, np.nan)
            self.snr_ = float("nan")
            self.mislabel_proba_ = np.zeros(y_index.shape[0])
            self.true_class_proba_ = np.eye(n_classes)[y_index]
            self._store_flip_rates(np.full(n_classes + 1, np.nan), None)
        else:
            self.eta_ = result.eta
            self.omega_ = result.omega
            self.snr_ = float(result.eta[0] / result.eta[1])
            self.mislabel_proba_ = result.mislabel_proba
            self.true_class_proba_ = result.true_class_proba
            self._store_flip_rates(result.flip_rates, result.flip_rate_intervals)
        self._store_joint(self._label_joint(y_index, sample_weight))
        self.plan_ = plan

    def _model_priors(self, clean_prior: tuple[float, float]) -> ModelPriors:
        return ModelPriors(
            weight=float(self.weight_prior),
            noise_grade=float(self.noise_grade_prior),
            clean=clean_prior,
        )

    def _fit_in_sample(
        self,
        search: LearnerSearch,
        X: np.ndarray,
        classes: np.ndarray,
        y: np.ndarray,
        sample_weight: np.ndarray,
        priors: ModelPriors,
        plan: FitPlan,
        init_eta: tuple[float, float],
    ) -> None:
        """Rounds of Algorithm 1 on all rows (from scratch or warm-started), with the noise
        model fitted in-sample by the inner loop (or the core model)."""
        margins = records = None
        if self.warm_start and hasattr(self, "estimators_"):
            self._check_warm_start(X, classes, plan)
            margins = [self._margin(X, len(self.estimators_))]
            state, records = self._state, [self._records()]
        else:
            phi0 = self._initial_clean_proba(plan)
            state = initial_state(y, sample_weight, phi0, init_eta, priors)
        booster = Booster(
            InMemoryRows([search], y, [sample_weight], margins),
            [state],
            priors,
            self._round_settings(plan),
            plan.learning_rate,
            records,
        )
        run_rounds(booster, plan.n_estimators, "VIBoost", self.verbose, done=booster.n_rounds)
        self.classes_ = classes
        self._n_train = y.shape[0]
        self._store_booster(booster, priors)
        margin = booster.margins()
        # phi_n for every training row, from the final q(w) and the final ensemble.
        self.clean_proba_ = self._state.clean.proba(y, margin)
        self._set_in_sample_noise_statistics(y, sample_weight, margin)

    def _cross_fitter(
        self,
        plan: FitPlan,
        priors: ModelPriors,
        init_eta: tuple[float, float],
        label: str = "",
        n_classes: int = 2,
    ) -> CrossFitter:
        """The robust fit's driver (:class:`~viboost.noise_fit.cross_fit.CrossFitter`)."""
        return CrossFitter(
            n_estimators=plan.n_estimators,
            learning_rate=plan.learning_rate,
            patience=self.n_iter_no_change,
            priors=priors,
            settings=self._round_settings(plan),
            noise_model=bool(self.noise_model),
            init_eta=init_eta,
            verbose=self.verbose,
            label=label,
            random_state=self.random_state,
            n_classes=n_classes,
            channel=self.noise_channel,
            drop_mislabeled=self.mislabeled == "drop",
            average_folds=self.final_model == "fold-average",
        )

    def _store_search(self, result: CrossFitResult) -> None:
        """The round-count search of a cross-fit (two or K classes): the counts scored, their
        scores, the chosen count, the folds and the calibration at that count."""
        self.cv_rounds_ = result.rounds
        self.cv_best_rounds_ = int(result.n_rounds)
        self.cv_n_splits_ = int(result.n_splits)
        self.cv_n_passes_ = int(result.n_passes)
        self.cv_log_likelihood_ = result.scores
        self.refit_weight_ = result.refit_weight
        self.noise_calibration_ = result.calibration

    def _store_cross_fit(
        self, result: CrossFitResult, y: np.ndarray, sample_weight: np.ndarray, priors: ModelPriors
    ) -> None:
        """The final booster's ensemble and the calibrated noise statistics of a cross-fit."""
        self._n_train = y.shape[0]
        self._store_booster(result.final, priors, result.records[0])
        self._store_search(result)
        self.cv_decision_function_ = result.out_of_fold
        self.clean_proba_ = result.clean_proba
        if result.calibration is None:  # core model: no noise statistics
            self._set_flip_rates(y, sample_weight, None)
            return
        self._state = result.state
        self._set_noise_statistics()
        # The in-sample paths of Algorithm 1's inner loop do not exist in a cross-fitted fit.
        self.snr_path_ = np.full(len(self.estimators_), np.nan)
        self.noise_grade_path_ = np.full(len(self.estimators_), np.nan)
        self.mislabel_proba_ = result.mislabel_proba
        self._store_flip_rates(result.flip_rates, result.flip_rate_intervals)

    def _store_booster(
        self, booster: Booster, priors: ModelPriors, records: BoosterRecords | None = None
    ) -> None:
        """The fitted ensemble and its records: those of ``booster``'s (only) ensemble, or
        ``records`` (an average of the booster's ensembles)."""
        records = booster.records[0] if records is None else records
        self.estimators_ = list(records.learners)
        self.alphas_ = np.array(records.alphas, dtype=np.float64)
        self.elbo_ = list(records.elbo)
        self.n_vi_iter_ = np.array(records.n_iter, dtype=int)
        self._state: VariationalState = booster.states[0]
        self._priors = priors
        self._set_noise_statistics()
        if self.noise_model:
            self.snr_path_ = np.array(records.snr_path, dtype=np.float64)
            self.noise_grade_path_ = np.array(records.noise_grade_path, dtype=np.float64)
        else:
            self.snr_path_ = np.full(len(records), np.nan)
            self.noise_grade_path_ = np.full(len(records), np.nan)

    def _records(self) -> BoosterRecords:
        """The fitted rounds as a booster's records (to continue them: ``warm_start``)."""
        return BoosterRecords(
            learners=list(self.estimators_),
            alphas=list(self.alphas_),
            elbo=list(self.elbo_),
            n_iter=list(self.n_vi_iter_),
            snr_path=list(self.snr_path_),
            noise_grade_path=list(self.noise_grade_path_),
        )

    def _set_in_sample_noise_statistics(
        self, y: np.ndarray, sample_weight: np.ndarray, margin: np.ndarray
    ) -> None:
        """The flip rates implied by Algorithm 1's in-sample q(w) and the training margins: a
        ranking, not calibrated (no intervals)."""
        self.cv_rounds_ = np.empty(0, dtype=int)
        self.cv_best_rounds_ = 0
        self.cv_n_splits_ = 0
        self.cv_n_passes_ = 0
        self.cv_log_likelihood_ = np.empty(0)
        self.refit_weight_ = None
        self.cv_decision_function_ = np.full(y.shape[0], np.nan)
        self.noise_calibration_ = None
        self.mislabel_proba_ = mislabel_proba_in_sample(self.clean_proba_, y, margin)
        self._set_flip_rates(y, sample_weight, None)

    def _set_flip_rates(
        self, y: np.ndarray, sample_weight: np.ndarray, intervals: np.ndarray | None
    ) -> None:
        """``noise_rate_`` and ``flip_rates_`` from ``mislabel_proba_`` (NaN without the noise
        model), with their credible intervals (NaN when there are none)."""
        if self.noise_model:
            rates = flip_rates_from_mislabel(self.mislabel_proba_, y, sample_weight)
        else:
            self.mislabel_proba_ = np.zeros(y.shape[0])
            rates = np.full(3, np.nan)
        self._store_flip_rates(rates, intervals)

    def _store_flip_rates(self, rates: np.ndarray, intervals: np.ndarray | None) -> None:
        """``noise_rate_``, ``flip_rates_`` and their intervals (NaN where there are none) from
        ``[share of wrong labels, flip rate of each true class]``."""
        if intervals is None:
            intervals = np.full((rates.size, 2), np.nan)
        self.noise_rate_ = float(rates[0])
        self.noise_rate_interval_ = intervals[0]
        self.flip_rates_ = rates[1:]
        self.flip_rates_interval_ = intervals[1:]

    def _resolve_plan(self, total_weight: float | None = None) -> FitPlan:
        """The preset's settings with the explicitly set ones (:func:`resolve_preset`); the
        robust preset's ``min_samples_leaf`` from ``total_weight``."""
        return resolve_preset(
            self.preset,
            self.n_estimators,
            self.learning_rate,
            self.alpha,
            self.noise_fit,
            self.max_leaf_nodes,
            self.max_depth,
            self.min_samples_leaf,
            self.leaf_weights,
            total_weight,
        )

    def _learner_search(
        self, X: np.ndarray, sample_weight: np.ndarray, plan: FitPlan
    ) -> LearnerSearch:
        """The search engine of this fit, built once: trees, binned stumps, or the exhaustive
        stump search with max_bins=None."""
        weighted = sample_weight > 0
        settings = plan.tree_settings(float(self.weight_prior))
        if settings is not None:
            return TreeSearch(
                X,
                active=weighted,
                max_bins=self.max_bins,
                random_state=self.random_state,
                sample_weight=sample_weight,
                **asdict(settings),
            )
        if self.max_bins is None:
            return ExactStumpSearch(X, active=weighted)
        return BinnedStumpSearch(
            X, active=weighted, max_bins=self.max_bins, random_state=self.random_state
        )

    def _in_sample_noise(self, plan: FitPlan) -> bool:
        """Whether the rounds run Algorithm 1's inner loop (the noise model fitted in-sample)."""
        return bool(self.noise_model) and plan.noise_fit == "in-sample"

    def _round_settings(self, plan: FitPlan) -> RoundSettings:
        """The hyperparameters of :func:`~viboost.variational.run_round`."""
        return RoundSettings(
            tau=float(self.tau),
            alpha=plan.alpha,
            noise_model=self._in_sample_noise(plan),
            tol=float(self.tol),
            max_vi_iter=int(self.max_vi_iter),
            fixed_vi_iter=self.fixed_vi_iter,
            update_alpha_once=bool(self.update_alpha_once),
        )

    def _initial_clean_proba(self, plan: FitPlan) -> float:
        """phi_n before the first round: 1 for the core model (and each booster of a
        cross-fitted fit: every label true)."""
        return float(self.init_clean_proba) if self._in_sample_noise(plan) else 1.0

    def _check_warm_start(self, X: np.ndarray, classes: np.ndarray, plan: FitPlan) -> None:
        if plan.n_estimators < len(self.estimators_):
            raise ValueError(
                f"n_estimators={plan.n_estimators} must be at least the "
                f"{len(self.estimators_)} rounds already fitted when warm_start=True."
            )
        if X.shape[0] != self._n_train or not np.array_equal(classes, self.classes_):
            raise ValueError(
                "warm_start=True continues the same run, so fit must get the same training data "
                f"(it was fitted on {self._n_train} rows with classes "
                f"{self.classes_.tolist()})."
            )

    def _set_noise_statistics(self) -> None:
        if self.noise_model:
            self.eta_ = self._state.eta.copy()
            self.omega_ = self._state.omega.copy()
            self.snr_ = self._state.snr
            self.noise_grade_ = self._state.noise_grade
        else:
            self.eta_ = np.full(2, np.nan)
            self.omega_ = np.full(2, np.nan)
            self.snr_ = float("nan")
            self.noise_grade_ = float("nan")

    # ------------------------------------------------------------------ prediction
    def _class_ensembles(self) -> list[tuple[list, np.ndarray]]:
        """K classes: each class's learners and weights (its ensemble ``F_k``)."""
        return [
            ([learners[k] for learners in self.estimators_], self.alphas_[:, k])
            for k in range(self.classes_.size)
        ]

    def _margin(self, X: np.ndarray, n_rounds: int) -> np.ndarray:
        """H(x) after ``n_rounds`` rounds, accumulated in the order used during fit; for K
        classes, the K margins ``F(x)``, shape (n_samples, K)."""
        if self.alphas_.ndim == 2:
            return np.column_stack(
                [
                    predict_ensemble(X, learners[:n_rounds], alphas[:n_rounds])
                    for learners, alphas in self._class_ensembles()
                ]
            )
        return predict_ensemble(X, self.estimators_[:n_rounds], self.alphas_[:n_rounds])

    def _classes_from_margin(self, margin: np.ndarray) -> np.ndarray:
        if margin.ndim == 2:
            return self.classes_[np.argmax(margin, axis=1)]
        return self.classes_[(margin > 0).astype(int)]

    @staticmethod
    def _proba_from_margin(margin: np.ndarray) -> np.ndarray:
        if margin.ndim == 2:
            return softmax(margin, axis=1)
        return np.column_stack([expit(-margin), expit(margin)])

    def decision_function(self, X) -> np.ndarray:
        """The ensemble log-odds ``H(x) = sum_t alpha_t h_t(x)``; positive favours ``classes_[1]``.

        For K > 2 classes, the K margins ``F_k(x)`` (one column per class, in the order of
        ``classes_``): the true class's probabilities are their softmax.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)

        Returns
        -------
        ndarray of shape (n_samples,), or (n_samples, n_classes) for K > 2 classes
        """
        check_is_fitted(self)
        X = self._validate_X(X, reset=False)
        n_rounds = len(self.estimators_)
        # One compiled pass of rows x stumps: one thread below the work threshold.
        with numba_threads(kernel_threads(self.n_jobs, X.shape[0] * self.alphas_.size)):
            return self._margin(X, n_rounds)

    def staged_decision_function(self, X) -> Iterator[np.ndarray]:
        """Yield ``H(x)`` (for K classes, ``F(x)``) after each round, the first after one base
        learner (per class)."""
        check_is_fitted(self)
        X = self._validate_X(X, reset=False)
        if self.alphas_.ndim == 2:
            margin = np.zeros((X.shape[0], self.classes_.size))
            for learners, alphas in zip(self.estimators_, self.alphas_, strict=True):
                for k, (learner, alpha) in enumerate(zip(learners, alphas, strict=True)):
                    margin[:, k] += alpha * learner.predict(X)
                yield margin.copy()
            return
        margin = np.zeros(X.shape[0])
        for learner, alpha in zip(self.estimators_, self.alphas_, strict=True):
            margin += alpha * learner.predict(X)
            yield margin.copy()

    def predict(self, X) -> np.ndarray:
        """Predicted class: ``classes_[1]`` where ``H(x) > 0``, else ``classes_[0]`` (for K
        classes, the class of the largest margin)."""
        return self._classes_from_margin(self.decision_function(X))

    def staged_predict(self, X) -> Iterator[np.ndarray]:
        """Yield the predicted classes after each round."""
        for margin in self.staged_decision_function(X):
            yield self._classes_from_margin(margin)

    def predict_proba(self, X) -> np.ndarray:
        """Probability of each class for the *true* label: ``[sigmoid(-H), sigmoid(H)]``.

        Under the model, ``H`` estimates the log-odds F(x) of a true label (section 2). An
        observed label is noise with probability ``1 - theta``, in which case it is +1 with
        probability ``sigmoid(xi)`` whatever x is; these probabilities leave that channel out.
        They are a score, not calibrated probabilities: with the robust preset they are
        under-confident (expected calibration error 0.047 against the clean test labels in the
        Spambase example of ``docs/label_noise.md``).

        For K classes, ``softmax(F(x))``, the model's probabilities of the true class.

        Returns
        -------
        ndarray of shape (n_samples, n_classes)
            Columns in the order of ``classes_``.
        """
        return self._proba_from_margin(self.decision_function(X))

    def predict_log_proba(self, X) -> np.ndarray:
        """Logarithm of :meth:`predict_proba`, computed without underflow."""
        margin = self.decision_function(X)
        if margin.ndim == 2:
            return log_softmax(margin, axis=1)
        return np.column_stack([log_expit(-margin), log_expit(margin)])

    def staged_predict_proba(self, X) -> Iterator[np.ndarray]:
        """Yield :meth:`predict_proba` after each round."""
        for margin in self.staged_decision_function(X):
            yield self._proba_from_margin(margin)

    def predict_contributions(self, X, background=None, background_weight=None) -> np.ndarray:
        """Exact SHAP values of :meth:`decision_function`: one column per feature, then the bias.

        The layout of LightGBM's ``predict(X, pred_contrib=True)`` and XGBoost's
        ``predict(X, pred_contribs=True)``. Without a background the values are path-dependent
        TreeSHAP (what LightGBM and XGBoost report): a feature left out of a coalition is
        integrated over the training weight (``cover``) that each base learner recorded at its
        splits during ``fit``, and the last column is the cover-weighted mean of ``H``. With a
        background they are interventional TreeSHAP, ``v(S) = E_background[H(x_S, b_rest)]``,
        and the last column is ``E_background[H]``. A stump's value goes to its one feature,
        ``alpha_t (h_t(x) - E[h_t])``. See :mod:`viboost.explain`.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)
            Rows to explain.
        background : array-like of shape (n_background, n_features), default=None
            ``None``: path-dependent values from the covers recorded in ``fit``, no data
            needed. Otherwise the rows over which each learner's expectation is taken, e.g. the
            training ``X`` or a sample of it; every row is used, and for trees the cost grows
            as ``n_samples * n_background``.
        background_weight : array-like of shape (n_background,), default=None
            Weights of the background rows, e.g. the training ``sample_weight``.

        Returns
        -------
        ndarray of shape (n_samples, n_features + 1), or (n_samples, n_features + 1, n_classes)
            Each row sums to ``decision_function(X)`` up to float rounding; for K classes, one
            such array per class along the last axis (shap's layout for multi-output models),
            each summing to that class's column of ``decision_function(X)``.

        Raises
        ------
        ValueError
            If ``background`` is None and the model has no recorded covers (fitted by a viboost
            version that did not record them).
        """
        from viboost.explain import predict_contributions

        return predict_contributions(self, X, background, background_weight)

    @property
    def feature_importances_(self) -> np.ndarray:
        """Each feature's share of the ensemble's importance (they sum to 1).

        For trees with per-leaf weights, the gain importance of LightGBM and XGBoost: the total
        gain of the splits on the feature (each split's gain in the log posterior, in the
        round's normalised weights). For stumps and tied trees, the share of the total
        ``|alpha_t|``: each learner's ``|alpha_t|`` spread over the features of its splits in
        proportion to their gains (all of it to the one feature of a stump). Learners that do
        not separate any rows (a constant stump, the intercept) count for nothing.
        """
        check_is_fitted(self)
        importances = np.zeros(self.n_features_in_)
        learners, alphas = self.estimators_, self.alphas_
        if alphas.ndim == 2:  # K classes: every class's learners
            learners = [learner for per_class in learners for learner in per_class]
            alphas = alphas.ravel()
        for learner, alpha in zip(learners, alphas, strict=True):
            features, gains = learner.split_gains()
            if getattr(learner, "per_leaf", False):
                np.add.at(importances, features, np.nan_to_num(np.maximum(gains, 0.0)))
            elif features.size == 1:
                importances[features[0]] += abs(alpha)
            elif features.size:
                gains = np.nan_to_num(np.maximum(gains, 0.0))
                total = gains.sum()
                shares = gains / total if total > 0 else np.full(features.size, 1 / features.size)
                np.add.at(importances, features, abs(alpha) * shares)
        total = importances.sum()
        return importances / total if total > 0 else importances


def _shown(label: object) -> object:
    """A class label as a user wrote it (a Python scalar, not a numpy one) for messages."""
    return label.item() if isinstance(label, np.generic) else label


def _softmax_rows(search: LearnerSearch, y: np.ndarray, n_classes: int) -> MakeRows:
    """The row sources of a K-class cross-fit in this process: per group (a fold, or the
    refit) one ensemble per class over the fit's one binning."""

    def make_rows(multiplicities: np.ndarray, validation: np.ndarray | None) -> SoftmaxRows:
        searches = [search.restricted(m > 0) for m in multiplicities]
        return SoftmaxRows(searches, y, n_classes, multiplicities, validation)

    return make_rows


def _in_memory_rows(search: LearnerSearch, y: np.ndarray) -> MakeRows:
    """The row sources of a cross-fitted fit in this process: every booster searches the fit's
    one binning, restricted to the rows it fits (positive multiplicity)."""

    def make_rows(multiplicities: np.ndarray, validation: np.ndarray | None) -> InMemoryRows:
        searches = [search.restricted(m > 0) for m in multiplicities]
        return InMemoryRows(searches, y, list(multiplicities), validation=validation)

    return make_rows
