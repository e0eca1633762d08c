"""VIBoost as a scikit-learn classifier (Algorithm 1 of Lorbert, Blei, Schapire and Ramadge).

This module owns the scikit-learn plumbing only: parameters and their validation, the fitted
attributes, pickling and the predictions. ``fit`` validates the data, decides the task once
(two classes or K: :mod:`viboost.fitting.task`), resolves the preset (the fitted attribute
``plan_``) and hands the rows to the fit driver (:class:`~viboost.fitting.driver.FitDriver`),
whose one result it stores (:class:`~viboost.fitting.driver.FittedModel`):

- ``noise_fit="in-sample"`` (the paper preset): Algorithm 1's rounds on all rows, with the
  noise model fitted by each round's inner loop;
- ``noise_fit="cross-fit"`` (the robust preset): fold boosters in lockstep choose the number of
  rounds and calibrate the noise model on their out-of-fold margins, and the final ensemble is
  fitted on every row counted ``s_n phi_n`` times (:mod:`viboost.fitting.cross_fit`).

Predictions are the task's link of the margins: ``predict_proba`` is ``sigmoid(H)`` for two
classes and ``softmax(F)`` for K, the model's probability of the *true* label (section 2), not
of a label that may have been corrupted by the noise process.
"""

from __future__ import annotations

import sys
import warnings
from collections.abc import Iterator
from numbers import Integral, Real
from typing import Any

import numpy as np
from sklearn.base import BaseEstimator, ClassifierMixin
from sklearn.exceptions import ConvergenceWarning
from sklearn.utils._param_validation import Interval, StrOptions
from sklearn.utils.multiclass import check_classification_targets
from sklearn.utils.validation import (
    _check_sample_weight,
    check_consistent_length,
    check_is_fitted,
    column_or_1d,
    validate_data,
)
from tqdm.auto import tqdm

from viboost._utils.categorical import NON_NUMERIC_HINT, CategoricalEncoder, resolve_categorical
from viboost._utils.parallel import (
    KERNELS,
    fit_threads,
    kernel_threads,
    numba_threads,
)
from viboost._utils.validation import check_classes, check_pair, reject_non_numeric_columns
from viboost._version import __version__
from viboost.boosting.booster import BoosterRecords
from viboost.boosting.predictor import predict_ensemble
from viboost.fitting import FitConfig, FitDriver, InMemoryData, Task, WarmStart, make_task
from viboost.presets import PRESETS, resolve_preset

__all__ = ["VIBoostClassifier", "ViboostVersionWarning"]


class ViboostVersionWarning(UserWarning):
    """A model is loaded with a viboost version other than the one that saved it."""


#: Appended to the error for non-numeric columns that are not categorical features.
_CATEGORICAL_HINT = NON_NUMERIC_HINT


#: Rows of the up-front fit: above the 4,096 rows from which rounds compress their rows; on
#: several threads above the sizes from which the partition, the node histograms, the rows'
#: split statistics and the calibration's sums run their parallel forms (2^15 rows, 2^17
#: cells, 2^15 rows and 2^14 scored rows in one call).
_UP_FRONT_ROWS = {False: 5_000, True: 40_000}
#: What :func:`_compile_up_front` has compiled, or found in numba's cache, in this process:
#: (K > 2 classes, several threads).
_COMPILED_UP_FRONT: set[tuple[bool, bool]] = set()
#: The kernels (:data:`viboost._utils.parallel.KERNELS`) whose cache entries tell
#: :func:`_compile_up_front` whether it would compile anything, for two classes and for K: the
#: bulk of a default fit's compile time.
_UP_FRONT_PROBES = {
    False: (
        "viboost.boosting.histogram._node_histograms",
        "viboost.boosting.splitting._partition",
        "viboost.boosting.split_statistics._row_statistics",
        "viboost.boosting.growth.attach_children",
        "viboost.boosting.partition._grow_in_place",
        "viboost.noise_fit.calibration._objective_sums",
    ),
    True: (
        "viboost.boosting.histogram._node_histograms",
        "viboost.boosting.partition._grow_in_place",
        "viboost.boosting.softmax._coupled_round",
        "viboost.noise_fit.class_calibration._objective_sums",
    ),
}


def _compile_up_front(multiclass: bool, threads: int, verbose: int) -> None:
    """Compile what a default fit needs before a verbose fit's progress bars start.

    numba compiles viboost's kernels on their first use (once after an install; later
    processes load them from its cache). Compiled mid-fit, the seconds went into the bars'
    rates, and their ETA was wrong (issue 54). This fits the default on synthetic rows
    (:data:`_UP_FRONT_ROWS`) for 20 rounds, on ``threads`` threads whatever the work threshold
    says (so the kernels' parallel forms compile when the fit to come will use them), under a
    bar that says it compiles (shown after two seconds, as the fit's own). Skipped when the
    cache entries of a few kernels (:data:`_UP_FRONT_PROBES`) say they are cached: the fit then
    loads them in a fraction of a second. Once per process for each (K > 2, threads > 1); the
    compile notice of :mod:`viboost._utils.compile` still says when numba compiles. Kernels
    that only other data need (categorical features, for instance) may still compile in the
    fit."""
    key = (multiclass, threads > 1)
    if key in _COMPILED_UP_FRONT:
        return
    probes = [KERNELS.get(name) for name in _UP_FRONT_PROBES[multiclass]]
    if all(kernel is not None and kernel.cached(threads > 1) for kernel in probes):
        # Cached (a guess from a few kernels' entries: :func:`viboost._utils.compile.is_cached`):
        # the fit loads them in a fraction of a second, and a fit on synthetic rows would cost
        # seconds for nothing.
        _COMPILED_UP_FRONT.add(key)
        return
    rng = np.random.default_rng(0)
    X = rng.standard_normal((_UP_FRONT_ROWS[threads > 1], 4))
    signal = X[:, 0] + X[:, 1] * X[:, 2] + rng.logistic(size=X.shape[0])
    y = np.digitize(signal, [-1.0, 1.0]) if multiclass else (signal > 0).astype(np.intp)
    with (
        tqdm(
            total=1,
            desc="VIBoost: compiling kernels (first use)",
            disable=not verbose,
            delay=2.0,
            file=sys.stderr,
        ) as progress,
        warnings.catch_warnings(),
    ):
        warnings.simplefilter("ignore", ConvergenceWarning)  # 20 rounds: best at the cap
        VIBoostClassifier(n_estimators=20, random_state=0)._fit(X, y, None, threads=threads)
        progress.update()
    _COMPILED_UP_FRONT.add(key)


def _same_categories(a: CategoricalEncoder, b: CategoricalEncoder) -> bool:
    """Whether two encoders have the same categorical features and categories."""
    if not np.array_equal(a.is_categorical_, b.is_categorical_):
        return False
    return all(
        (x is None and y is None)
        or (x is not None and y is not None and len(x) == len(y) and np.array_equal(x, y))
        for x, y in zip(a.categories_, b.categories_, strict=True)
    )


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
        5 folds; ``cv_best_rounds_``; when the cap stops it short of that, ``fit`` warns
        too). None: from the preset (robust: 1000, paper: 100).
    preset : {"robust", "paper"}, default="robust"
        Fills in the parameters left at None: ``n_estimators``, ``learning_rate``, ``alpha``
        and ``noise_fit`` (see above).
    learning_rate : float or None, default=None
        Shrinkage: round t adds ``learning_rate * alpha_t h_t`` to ``H``. None: from the preset
        (robust: 0.2, paper: 1).
    weight_prior : float or None, default=None
        mu_0: multiplicity of the prior v-Log([+1,-1], [0,0], mu_0) on each learner's weight
        (each leaf's, with per-leaf weights): it counts as mu_0 rows of each label at margin 0.
        Larger values shrink the weights more (the 1/Z term of section 6 eq. (18)); near 0 the
        core model is discrete AdaBoost. None: from the preset (paper: 1, the paper's; robust:
        ``min_samples_leaf / 2``, at least 1, so that the prior weighs as much as the rows
        of the smallest leaf and shrinks that leaf about halfway to 0:
        :func:`~viboost.presets.auto_weight_prior`; 10 on all but tiny data). The value used
        is ``plan_.weight_prior``.
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
        :func:`~viboost.fitting.cross_fit.auto_fold_count`); the number used is
        ``cv_n_splits_``. A splitter or an iterable of
        (train, validation) index arrays is used as given, as in scikit-learn; rows in no
        validation fold get the final ensemble's margin.
    n_iter_no_change : int or None, default=30
        With cross-fitting: stop once the out-of-fold log-likelihood (scored every 10 rounds)
        has not risen significantly for this many rounds (by more than 1e-5 nats per unit of
        sample weight, and at least 0.1% of the score's size, plus one standard error of the
        rise, paired over the rows: :class:`~viboost.fitting.cross_fit.RoundCountSearch`);
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
        (:class:`~viboost.boosting.stumps.ExactStumpSearch`; stumps only). A categorical
        feature may have at most ``max_bins`` categories.
    categorical_features : "from_dtype", array-like of bool, int or str, or None, \
            default="from_dtype"
        Which features are categorical, as in scikit-learn's HGB: ``"from_dtype"``, the
        DataFrame columns of dtype ``category``, ``object`` or ``string`` (python or pyarrow
        storage), so that string columns are categorical (numpy input: none); a boolean mask
        of length ``n_features``; integer indices; feature names (a DataFrame's columns); or
        None for none. A split on a categorical feature sends a set of its categories to one
        side. Categories are matched by value (pandas category codes and the order of the
        categories do not matter); missing values and categories not seen in ``fit`` go to
        each split's missing side. An ordered categorical is treated as unordered, as HGB does
        (pass ``column.cat.codes`` as a numeric column to keep the order). A numeric column
        listed here must hold integers ``0, 1, 2, ...``; its negative values are missing. A
        feature with more than ``max_bins`` categories, or mixing numbers and strings, is an
        error naming it; so is a column fitted with string categories that holds numbers at
        predict (or the reverse).
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
        (:meth:`~viboost.fitting.cross_fit.CrossFitter.fit`). Where it is the more accurate,
        and what it costs: ``docs/multiclass.md``.
    final_model : {"refit", "fold-average"}, default="refit"
        With cross-fitting: what is fitted once the noise model is calibrated. ``"refit"``: one
        booster on every row (counted as ``mislabeled`` says) for the chosen round count
        scaled to all the rows. ``"fold-average"``: one such booster per fold, each on its
        fold's training rows for the chosen count (the count that the search chose for
        boosters of that size), and the model is the average of their margins (bagging over
        the folds; ``estimators_`` holds every booster's learners, round by round, each weight
        divided by the number of folds). It costs about ``(cv - 1)**2 / cv`` times a refit;
        its accuracy and cost, measured: ``docs/multiclass.md``.
    n_jobs : int or None, default=None
        Threads for the compiled (numba) kernels of ``fit`` and of the predictions: None means
        all cores (as in HistGradientBoosting and LightGBM), or the ``n_jobs`` of an enclosing
        :func:`joblib.parallel_config` context; -1 means all cores, ``-k`` all but ``k - 1``;
        at most ``numba.config.NUMBA_NUM_THREADS``. Small calls (fewer than about a million
        rows x features in ``fit``, rows x stumps in a prediction) run on one thread whatever
        ``n_jobs``, so they never pay for waking threads on a busy machine. The count is set
        for the duration of the call only, and the results are bit-identical for every
        ``n_jobs``.
    random_state : int, RandomState instance or None, default=None
        Seeds the cross-fitting folds, the draws of the credible intervals and the row
        subsample (at most 200,000 rows) from which quantile bin edges are taken. Pass an int
        for reproducible fits.
    verbose : int, default=0
        1 or more shows a progress bar on stderr for fits that last over two seconds. A
        cross-fitted fit of about 10^6 rows x features or more whose kernels numba has not
        compiled yet (after an install) first fits the default on synthetic rows, under a bar
        of its own, so that they compile before the fit's bars start and those estimate the
        fit alone.

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
        signal model, N theta. Cross-fitted, it is the posterior average over "no noise" and
        the noise model (``no_noise_proba_``); the refit counts the noise model's own phi_n
        (``refit_weight_``).
    mislabel_proba_ : ndarray of shape (n_samples,)
        Posterior probability that training label n differs from the row's true class,
        ``(1 - phi_n) sigmoid(-y_n F_n)``; calibrated when cross-fitted, a ranking otherwise.
        Zeros without the noise model.
    noise_rate_ : float
        Estimated share of wrong training labels: the (weighted) mean of ``mislabel_proba_``.
    noise_rate_interval_ : ndarray of shape (2,)
        90% credible interval of the share of wrong training labels: equal-tailed quantiles of
        its posterior (:mod:`viboost.noise_fit.posterior`), which puts ``no_noise_proba_`` at
        0, so the interval starts at 0 when that probability exceeds 5%. It is conditional on
        the out-of-fold margins: features and labels alone cannot tell flipped labels from
        classes that overlap as much (``docs/label_noise.md``). NaN when not cross-fitted.
    no_noise_proba_ : float
        The posterior probability that no training label is wrong (the model "no noise",
        prior probability 1/2, against the noise model; Bayes' rule on their evidence given the
        out-of-fold margins). NaN when not cross-fitted.
    noise_rate_draws_ : ndarray of shape (n_draws, 2)
        The posterior of the share of wrong labels as weighted draws: column 0 a value, column
        1 its probability (they sum to 1); the first row is "no noise", ``(0,
        no_noise_proba_)``. :func:`viboost.plotting.plot_noise_rate_posterior` draws it. Empty
        (0 rows) when not cross-fitted.
    flip_rates_ : ndarray of shape (n_classes,)
        ``flip_rates_[k]``: estimated share of the rows of true class ``classes_[k]`` that carry
        another label (for two classes, the binary channel of S.2).
    flip_rates_interval_ : ndarray of shape (n_classes, 2)
        90% credible intervals of ``flip_rates_``, one row per class (quantiles of the same
        posterior); NaN when not cross-fitted, and for a class with fewer training rows than
        folds (its noise is not identified: a warning says so).
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
    noise_matrix_interval_ : ndarray of shape (n_classes, n_classes, 2)
        90% credible intervals of each entry of ``noise_matrix_`` (quantiles of the noise
        posterior), pairwise noise included; NaN when not cross-fitted and in the column of a
        class whose noise is not identified.
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
        5 folds, 2 with 2; :func:`~viboost.fitting.cross_fit.refit_round_count`), at most
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
    is_categorical_ : ndarray of bool of shape (n_features,) or None
        Which features are categorical (see ``categorical_features``); None when none is.
    categories_ : list of (ndarray or None)
        Per feature, its categories in the order of their codes (strings, or integers as
        floats), or None for a numeric feature.
    n_features_in_ : int
        Number of features seen at fit.
    feature_names_in_ : ndarray of shape (n_features,)
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
        "weight_prior": [Interval(Real, 0, None, closed="neither"), None],
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
        "categorical_features": ["array-like", StrOptions({"from_dtype"}), None],
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
        weight_prior: float | None = None,
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
        categorical_features: Any = "from_dtype",
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
        self.categorical_features = categorical_features
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
        state.setdefault("categorical_features", None)  # saved before: every feature numeric
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
        if hasattr(self, "n_features_in_") and "_encoder" not in self.__dict__:
            # Saved before categorical features: every feature was numeric.
            self._store_encoder(CategoricalEncoder.numeric(self.n_features_in_))
        if hasattr(self, "cv_rounds_") and not hasattr(self, "cv_n_splits_"):
            # Saved before cv="auto": an int cv (at most that many folds), or a splitter.
            crossed = np.size(self.cv_rounds_) and isinstance(self.cv, Integral)
            self.cv_n_splits_ = int(self.cv) if crossed else 0

    def _validate_X(self, X: Any, reset: bool = False) -> np.ndarray:
        """Rows checked and encoded as ``fit`` encoded its data: the features (and feature
        names) seen in ``fit``, categorical columns as their codes (unseen categories NaN),
        float64 with NaN allowed. ``reset=True`` is for ``fit``, which uses :meth:`_fit_X`."""
        if reset:
            X, _, fitted = self._fit_X(X, None)
            self._store_encoder(fitted)
            return X
        encoder: CategoricalEncoder | None = getattr(self, "_encoder", None)  # None: Dask
        if encoder is None or not encoder.any_categorical:
            reject_non_numeric_columns(X, type(self).__name__, hint=_CATEGORICAL_HINT)
            return validate_data(
                self, X, reset=False, dtype=np.float64, ensure_all_finite="allow-nan"
            )
        validate_data(self, X, reset=False, skip_check_array=True)
        self._reject_undeclared(X, encoder.is_categorical_)
        return encoder.transform(X, estimator=self)

    def _reject_undeclared(self, X: Any, is_categorical: np.ndarray) -> None:
        """A ValueError naming the non-numeric columns of a DataFrame ``X`` that are not
        categorical features (they would fail, unnamed, in the conversion to floats)."""
        if hasattr(X, "iloc") and hasattr(X, "columns") and len(X.columns) == is_categorical.size:
            numeric = X.iloc[:, np.flatnonzero(~is_categorical)]
            reject_non_numeric_columns(numeric, type(self).__name__, hint=_CATEGORICAL_HINT)

    def _store_encoder(self, encoder: CategoricalEncoder) -> None:
        """Keep the fitted encoder, and its public face ``is_categorical_``/``categories_``."""
        self._encoder = encoder
        categorical = encoder.any_categorical
        self.is_categorical_: np.ndarray | None = (
            encoder.is_categorical_.copy() if categorical else None
        )
        self.categories_: list[np.ndarray | None] = list(encoder.categories_)

    def _fit_X(self, X: Any, y: Any) -> tuple[np.ndarray, Any, CategoricalEncoder]:
        """``fit``'s data: X validated and encoded by a new encoder (``n_features_in_`` and
        ``feature_names_in_`` set as scikit-learn sets them), y as a 1-d array, and the
        encoder (fitted; not stored)."""
        # Names and the number of features first: categorical_features may name columns.
        validate_data(self, X, reset=True, skip_check_array=True)
        names = getattr(self, "feature_names_in_", None)
        mask = resolve_categorical(X, self.categorical_features, names)
        if not mask.any():
            reject_non_numeric_columns(X, type(self).__name__, hint=_CATEGORICAL_HINT)
            if y is None:
                X = validate_data(self, X, dtype=np.float64, ensure_all_finite="allow-nan")
            else:
                X, y = validate_data(
                    self, X, y, dtype=np.float64, ensure_all_finite="allow-nan", reset=True
                )
            return X, y, CategoricalEncoder.numeric(X.shape[1])
        if self.max_bins is None:
            raise ValueError(
                "max_bins=None (the exhaustive stump search) does not fit categorical "
                "features; give max_bins (at most 255) or categorical_features=None."
            )
        self._reject_undeclared(X, mask)
        from_dtype = isinstance(self.categorical_features, str)
        encoder = CategoricalEncoder().fit(X, mask, self.max_bins, from_dtype=from_dtype)
        X = encoder.transform(X, estimator=self)
        if y is not None:
            y = column_or_1d(y, warn=True)
            check_consistent_length(X, y)
        return X, y, encoder

    @property
    def _task(self) -> Task:
        """Two classes or K (:mod:`viboost.fitting.task`), from the fitted ``classes_``."""
        check_is_fitted(self)
        return make_task(self.classes_.size)

    def _fit_config(self) -> FitConfig:
        """The parameters as the fit driver reads them (the pairs checked)."""
        return FitConfig(
            self.get_params(deep=False),
            clean_prior=check_pair("clean_prior", self.clean_prior),
            init_eta=check_pair("init_eta", self.init_eta),
            name=type(self).__name__,
        )

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
        return self._fit(X, y, sample_weight)

    def _fit(self, X, y, sample_weight=None, threads: int | None = None) -> VIBoostClassifier:
        """:meth:`fit`; ``threads``: the kernels' threads, whatever ``n_jobs`` and the work
        threshold say (:func:`_compile_up_front`)."""
        self._validate_params()
        config = self._fit_config()
        if y is None:  # scikit-learn's message
            validate_data(self, X, y, skip_check_array=True, reset=True)
        X, y, encoder = self._fit_X(X, y)
        check_classification_targets(y)
        classes = np.unique(y)  # hashed for integer labels: fast on millions of rows
        check_classes(classes, type(self).__name__)
        sample_weight = _check_sample_weight(
            sample_weight, X, dtype=np.float64, ensure_non_negative=True
        )
        task = make_task(classes.size)
        y_index = np.searchsorted(classes, y)
        weighted = sample_weight > 0
        counts = np.bincount(y_index[weighted], minlength=classes.size)
        plan = config.plan(task, classes, counts, float(sample_weight.sum()))
        warm = self._warm_start(X, classes, plan, encoder)
        self._store_encoder(encoder)
        # Only a categorical fit needs the engine's n_categories (0 for a numeric feature).
        categorical = {"n_categories": encoder.n_categories_} if encoder.any_categorical else {}
        data = InMemoryData(
            task,
            X,
            task.encode(y_index),
            sample_weight,
            plan,
            self.max_bins,
            self.random_state,
            **categorical,
        )
        driver = FitDriver(task, config, plan)
        plan, folds = driver.folds(data)
        # The kernels' threads for this call only; one thread below the work threshold.
        work = int(np.count_nonzero(weighted)) * X.shape[1]
        if threads is None:
            threads = kernel_threads(self.n_jobs, work)
            if self.verbose and plan.noise_fit == "cross-fit":
                # Whatever the size: compiling takes tens of seconds, and mid-fit it went into
                # the bars' rates (the demo's 460 rows read "10/1000 [00:27<45:22]").
                _compile_up_front(task.n_ensembles > 1, threads, self.verbose)
        with fit_threads(threads):
            fitted = driver.fit(data, plan, folds, warm)
        self.classes_ = classes
        fitted.store(self)
        return self

    def _warm_start(
        self,
        X: np.ndarray,
        classes: np.ndarray,
        plan: Any,
        encoder: CategoricalEncoder | None = None,
    ) -> WarmStart | None:
        """The fitted run to continue (``warm_start=True`` on a fitted in-sample model), after
        checking that ``fit`` got the same training data (``encoder``, fitted to it, finds the
        categories of the fitted run); else None."""
        if not (self.warm_start and hasattr(self, "estimators_") and hasattr(self, "_state")):
            return None
        fitted = getattr(self, "_encoder", None)
        if encoder is not None and fitted is not None and not _same_categories(fitted, encoder):
            raise ValueError(
                "warm_start=True continues the same run, so fit must get the same training "
                "data, with the same categorical features and categories as the fitted run."
            )
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
        records = BoosterRecords(
            learners=list(self.estimators_),
            alphas=list(self.alphas_),
            elbo=list(self.elbo_),
            n_iter=list(self.n_vi_iter_),
            snr_path=list(self.snr_path_),
            noise_grade_path=list(self.noise_grade_path_),
        )
        margin = self._margin(X, len(self.estimators_))[:, 0]
        return WarmStart([margin], self._state, [records])

    # ------------------------------------------------------------------ prediction
    def _margin(self, X: np.ndarray, n_rounds: int) -> np.ndarray:
        """The margins after ``n_rounds`` rounds, one column per ensemble (``H``, or the K
        margins ``F``), accumulated in the order used during fit."""
        return np.column_stack(
            [
                predict_ensemble(X, learners[:n_rounds], alphas[:n_rounds])
                for learners, alphas in self._task.ensembles(self.estimators_, self.alphas_)
            ]
        )

    def _margins(self, X) -> np.ndarray:
        """The fitted margins of ``X`` (validated), one column per ensemble."""
        check_is_fitted(self)
        X = self._validate_X(X, reset=False)
        # One compiled pass of rows x stumps: one thread below the work threshold.
        with numba_threads(kernel_threads(self.n_jobs, X.shape[0] * self.alphas_.size)):
            return self._margin(X, len(self.estimators_))

    def _staged_margins(self, X) -> Iterator[np.ndarray]:
        """The margins after each round, one column per ensemble."""
        check_is_fitted(self)
        X = self._validate_X(X, reset=False)
        ensembles = self._task.ensembles(self.estimators_, self.alphas_)
        margin = np.zeros((X.shape[0], len(ensembles)))
        for t in range(len(self.estimators_)):
            for k, (learners, alphas) in enumerate(ensembles):
                margin[:, k] += alphas[t] * learners[t].predict(X)
            yield margin.copy()

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
        return self._task.decision(self._margins(X))

    def staged_decision_function(self, X) -> Iterator[np.ndarray]:
        """Yield ``H(x)`` (for K classes, ``F(x)``) after each round, the first after one base
        learner (per class)."""
        task = self._task
        for margin in self._staged_margins(X):
            yield task.decision(margin)

    def predict(self, X) -> np.ndarray:
        """Predicted class: ``classes_[1]`` where ``H(x) > 0``, else ``classes_[0]`` (for K
        classes, the class of the largest margin)."""
        index = self._task.predict_index(self._margins(X))
        return self.classes_[index]

    def staged_predict(self, X) -> Iterator[np.ndarray]:
        """Yield the predicted classes after each round."""
        task = self._task
        for margin in self._staged_margins(X):
            yield self.classes_[task.predict_index(margin)]

    def predict_proba(self, X) -> np.ndarray:
        """Probability of each class for the *true* label: ``[sigmoid(-H), sigmoid(H)]``.

        Under the model, ``H`` estimates the log-odds F(x) of a true label (section 2). An
        observed label is noise with probability ``1 - theta``, in which case it is +1 with
        probability ``sigmoid(xi)`` whatever x is; these probabilities leave that channel out.
        They are a score, not calibrated probabilities: with the robust preset they are
        under-confident (their calibration against clean test labels is measured in
        ``docs/label_noise.md``).

        For K classes, ``softmax(F(x))``, the model's probabilities of the true class.

        Returns
        -------
        ndarray of shape (n_samples, n_classes)
            Columns in the order of ``classes_``.
        """
        return self._task.proba(self._margins(X))

    def predict_log_proba(self, X) -> np.ndarray:
        """Logarithm of :meth:`predict_proba`, computed without underflow."""
        return self._task.log_proba(self._margins(X))

    def staged_predict_proba(self, X) -> Iterator[np.ndarray]:
        """Yield :meth:`predict_proba` after each round."""
        task = self._task
        for margin in self._staged_margins(X):
            yield task.proba(margin)

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
        for learner, alpha in self._task.learners(self.estimators_, self.alphas_):
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
