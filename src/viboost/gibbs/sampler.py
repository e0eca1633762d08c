"""Full-Bayes inference in the noise model: the Gibbs sampler of Algorithm 2 (supplement S.3).

Structure of this module
------------------------
- :class:`GibbsSampler` holds the hyperparameters (the priors of section 4 and the chain
  settings), validates the input at ``fit``, builds the ``N x M`` matrix of base-classifier
  outputs -- given directly, or from the base classifiers of a fitted
  :class:`~viboost.VIBoostClassifier` (:mod:`viboost.gibbs.base_classifiers`: its stumps, its
  tied trees, or each leaf of its per-leaf trees as the indicator ``1{x in leaf}``) -- and runs
  the chains, one call of the compiled :func:`viboost.gibbs.kernels.run_chain` each (in threads
  when ``n_jobs`` asks for them). Outputs are +-1, or 0/1 for leaf indicators (then stored as a
  sparse matrix, and a leaf's weight costs the rows of its leaf only).
  A sweep draws ``c_1..c_M`` (each an exact v-Log draw by adaptive rejection sampling, the
  method the paper used and found "too time consuming" in Matlab), then ``xi`` (a two-term
  v-Log, drawn exactly through ``sigmoid(xi) ~ Beta``), each ``w_n`` (Bernoulli) and ``theta``
  (Beta).
- The draws are exposed as arrays (``weight_draws_``, ``noise_grade_draws_``,
  ``clean_rate_draws_``, ``clean_proba_draws_``), summarised (``weights_``, ``snr_``,
  ``noise_grade_``, ``clean_proba_``, comparable with VIBoost's variational estimates), and
  converted by :meth:`GibbsSampler.to_inference_data` to what the installed ArviZ takes: an
  ``xarray.DataTree`` under ArviZ 1.x, an ``arviz.InferenceData`` under ArviZ 0.2x (same groups,
  variables and coordinates), for ``arviz.summary``, the trace plots, R-hat and effective
  sample sizes.
- :func:`weight_conditional` returns the exact conditional of one weight as a
  :class:`~viboost.distributions.VersatileLogistic`, from the chains' own compiled terms.
- Prediction averages over the draws: ``predict_proba`` is the posterior mean of
  ``sigmoid(F(x))``, the probability of a *true* label (section 2), and ``decision_function``
  the posterior mean of ``F(x) = sum_m c_m f_m(x)``.

Each chain starts from a draw of the prior (dispersed starts, so R-hat can detect a chain that
has not mixed); its random numbers come from one seed drawn from ``random_state``
(:func:`viboost._utils.validation.spawn_generator`).

Two classes only: the sampler draws the binary model of Algorithm 2. Labels of more than two
classes, or a :class:`~viboost.VIBoostClassifier` fitted on more than two (one ensemble per
class, coupled through the softmax), raise a ValueError that says so; the K-class conditionals
(v-Logs with shifted knots, a Dirichlet, Bernoullis and a Beta) are not sampled yet.
"""

from __future__ import annotations

import warnings
from numbers import Integral, Real

import numpy as np
import scipy.sparse as sp
from joblib import Parallel, delayed
from scipy.special import expit
from sklearn.base import BaseEstimator, ClassifierMixin
from sklearn.utils._param_validation import HasMethods, Interval
from sklearn.utils.multiclass import check_classification_targets
from sklearn.utils.validation import check_array, check_is_fitted, column_or_1d

from viboost._utils.parallel import numba_threads, resolve_n_jobs
from viboost._utils.validation import check_pair, check_random_state, spawn_generator
from viboost.boosting.stumps import DecisionStump
from viboost.boosting.trees import HistogramTree
from viboost.distributions import VersatileLogistic
from viboost.estimator import VIBoostClassifier
from viboost.gibbs.base_classifiers import (
    LeafIndicator,
    base_outputs,
    distinct_base_classifiers,
)
from viboost.gibbs.generative import sample_two_term_vlog
from viboost.gibbs.kernels import run_chain, weight_terms

__all__ = ["GibbsSampler", "weight_conditional"]

# Rows of new X per block in ``predict_proba`` (a block holds rows x draws margins).
_PREDICT_BLOCK_ELEMENTS = 1 << 22


def import_arviz():
    """Import ArviZ (imported lazily: only the ArviZ output needs it), without the FutureWarning
    by which ArviZ 0.2x announces its 1.0 refactor on every import."""
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message="\\s*ArviZ is undergoing", category=FutureWarning)
        import arviz
    return arviz


def arviz_uses_datatree(arviz) -> bool:
    """Whether the ArviZ module ``arviz`` is 1.x or later: its data are ``xarray.DataTree``
    objects and its ``from_dict`` takes one dict of groups (that of ``arviz_base``), where ArviZ
    0.2x has ``InferenceData`` and a keyword per group."""
    major = str(getattr(arviz, "__version__", "0")).split(".", 1)[0]
    return major.isdigit() and int(major) >= 1


def _check_two_classes(classes: np.ndarray | None, whose: str) -> None:
    """Raise the ValueError of a K > 2 class input: the sampler draws the binary model."""
    if classes is None or len(classes) <= 2:
        return
    shown = ", ".join(str(c) for c in list(classes)[:5]) + (", ..." if len(classes) > 5 else "")
    raise ValueError(
        f"GibbsSampler samples the binary model of Algorithm 2 (two classes), but {whose} "
        f"{len(classes)} classes ({shown}); K classes are not sampled yet. "
        "VIBoostClassifier fits K classes (variationally, with cross-fitted noise statistics)."
    )


def _column_storage(outputs) -> tuple[np.ndarray, np.ndarray, np.ndarray, bool]:
    """The ``N x M`` outputs by columns, as :func:`viboost.gibbs.kernels.run_chain` takes them:
    ``(indptr, indices, values, dense)``, compressed sparse columns for a sparse matrix (zeros
    dropped), else the dense transpose raveled (``indices`` empty)."""
    if sp.issparse(outputs):
        columns = sp.csc_matrix(outputs, dtype=np.float64, copy=True)
        columns.eliminate_zeros()
        columns.sort_indices()
        return (
            columns.indptr.astype(np.int64),
            columns.indices.astype(np.int64),
            np.ascontiguousarray(columns.data, dtype=np.float64),
            False,
        )
    outputs_t = np.ascontiguousarray(np.asarray(outputs, dtype=np.float64).T)
    n_classifiers, n_rows = outputs_t.shape
    indptr = np.arange(n_classifiers + 1, dtype=np.int64) * n_rows
    return indptr, np.empty(0, dtype=np.int64), outputs_t.reshape(-1), True


def weight_conditional(
    outputs, y, weights, is_clean, m: int, weight_prior: float = 1.0
) -> VersatileLogistic:
    """The exact conditional of the weight ``c_m`` given the rest (S.3, eq. (59)), as a v-Log.

    It is built by the compiled code the chains use (:func:`viboost.gibbs.kernels.weight_terms`):
    one term ``log sigmoid(a_n c + b_n)`` per row with ``w_n = 1`` and ``f_m(x_n) != 0``, i.e.
    slope ``-y_n f_m(x_n)``, knot ``-f_m(x_n) (F_n - c_m f_m(x_n))`` (the rest of the margin) and
    multiplicity 1, plus the prior terms v-Log([+1, -1], [0, 0], [mu_0, mu_0]). For a leaf
    indicator (0 outside its leaf, 1 inside) the terms are those of the leaf's rows only.

    Parameters
    ----------
    outputs : array-like or scipy.sparse matrix of shape (N, M)
        ``f_m(x_n)`` in {-1, 0, +1}.
    y : array-like of shape (N,)
        Labels in {-1, +1}.
    weights : array-like of shape (M,)
        The current weights ``c`` (``c_m`` itself only shifts the knots' reference).
    is_clean : array-like of bool, shape (N,)
        The type selectors ``w_n``.
    m : int
        Which weight.
    weight_prior : float, default=1.0
        ``mu_0``.

    Returns
    -------
    VersatileLogistic
        The conditional density of ``c_m``.

    Examples
    --------
    >>> import numpy as np
    >>> from viboost.gibbs.sampler import weight_conditional
    >>> leaf = np.array([[1.0], [1.0], [0.0]])  # rows 0 and 1 in the leaf
    >>> dist = weight_conditional(leaf, [1.0, -1.0, 1.0], [0.5], [True, True, True], 0)
    >>> dist.n_terms  # the two prior terms and one per row of the leaf
    4
    """
    if not sp.issparse(outputs):
        outputs = np.asarray(outputs, dtype=np.float64)
    y = np.asarray(y, dtype=np.float64)
    weights = np.asarray(weights, dtype=np.float64)
    clean = np.asarray(is_clean, dtype=bool).astype(np.uint8)
    n_rows = y.shape[0]
    if outputs.ndim != 2 or outputs.shape != (n_rows, weights.shape[0]) or clean.shape != y.shape:
        raise ValueError(
            f"outputs must be N x M with y and is_clean of length N and weights of length M; got "
            f"{outputs.shape}, {y.shape}, {clean.shape} and {weights.shape}."
        )
    storage = _column_storage(outputs)
    margin = np.asarray(outputs @ weights, dtype=np.float64).reshape(n_rows)
    a, b, exp_abs_b = np.empty(n_rows), np.empty(n_rows), np.empty(n_rows)
    k = weight_terms(*storage, y, margin, clean, int(m), float(weights[m]), a, b, exp_abs_b)
    a, b = a[:k], b[:k]
    mu0 = float(weight_prior)
    return VersatileLogistic(
        np.concatenate([[1.0, -1.0], -a]),
        np.concatenate([[0.0, 0.0], -a * b]),
        np.concatenate([[mu0, mu0], np.ones(k)]),
    )


class GibbsSampler(ClassifierMixin, BaseEstimator):
    """Posterior draws of the noise model of section 4 by Gibbs sampling (Algorithm 2).

    Given ``M`` base classifiers (their outputs on the ``N`` training rows: ``+-1``, or 0/1 for
    the indicator of a tree's leaf) and the labels, the sampler draws from the joint posterior of
    the weights ``c_1..c_M``, the noise grade ``xi``, the type selectors ``w_1..w_N`` and the type
    prior ``theta``. Where VIBoost (:class:`~viboost.VIBoostClassifier`) fits a factorised
    variational approximation while it chooses its base classifiers, the sampler takes a fixed
    set of them -- for instance those a VIBoost fit selected -- and returns draws whose spread is
    the posterior uncertainty. A weight whose classifier is 0 on a row (a leaf indicator outside
    its leaf) has the v-Log conditional over the other rows only; the other conditionals are
    those of Algorithm 2.

    Parameters
    ----------
    n_draws : int, default=1000
        Draws kept per chain (after burn-in and thinning).
    n_burnin : int, default=500
        Sweeps discarded at the start of each chain.
    thin : int, default=1
        Keep one sweep in ``thin``.
    n_chains : int, default=4
        Independent chains, each started from a draw of the prior.
    weight_prior : float, default=1.0
        mu_0: each weight has the prior v-Log([+1, -1], [0, 0], [mu_0, mu_0]).
    noise_grade_prior : float, default=1.0
        mu_0': the prior of the noise grade xi is v-Log([+1, -1], [0, 0], [mu_0', mu_0']).
    clean_prior : pair of float, default=(1.0, 1.0)
        zeta: theta, the probability that a label is true, has the prior Beta(zeta_1, zeta_2).
    classifier : VIBoostClassifier or None, default=None
        A fitted VIBoost classifier whose distinct base classifiers are the sampler's
        (:func:`viboost.gibbs.base_classifiers.distinct_base_classifiers`): each stump, each tree
        with tied leaves (one +-1 classifier), and each leaf of a tree with per-leaf weights (its
        indicator, 0 or 1; the one-leaf tree of a per-leaf fit is the intercept); ``X`` is then
        the feature matrix. With None, ``X`` is the matrix of base-classifier outputs itself
        (``X[n, m] = f_m(x_n)`` in {-1, 0, +1}; a numpy array or a scipy.sparse matrix). It is
        used as fitted, never refitted; since ``sklearn.base.clone`` (as in cross-validation)
        returns an unfitted copy, pass ``sklearn.frozen.FrozenEstimator(classifier)`` there.
    store_row_draws : bool, default=True
        Keep, for every kept sweep, each row's ``P(w_n = 1 | c, xi, theta, y)``
        (``n_chains * n_draws * n_samples`` float32 values) so that ``clean_proba`` is a
        variable of :meth:`to_inference_data`. False keeps only their posterior mean,
        ``clean_proba_``.
    n_jobs : int or None, default=None
        Chains run in parallel threads (the compiled kernel releases the GIL), at most
        ``min(n_jobs, n_chains)`` at once: None means all cores (or an enclosing
        :func:`joblib.parallel_config`'s ``n_jobs``), as in the classifier; -1 all cores; at most
        ``numba.config.NUMBA_NUM_THREADS``. Each chain runs serially, so no more than ``n_jobs``
        threads compute at once.
    random_state : int, RandomState instance or None, default=None
        Seeds the chains' starting points and random streams; the draws are reproducible for a
        fixed seed, whatever ``n_jobs``. Resolved by
        :func:`viboost._utils.validation.check_random_state` (an int seeds a
        ``numpy.random.RandomState``, as in scikit-learn); each chain's compiled kernel gets a
        ``numpy.random.Generator`` from :func:`viboost._utils.validation.spawn_generator`.

    Attributes
    ----------
    weight_draws_ : ndarray of shape (n_chains, n_draws, n_classifiers)
        Draws of the weights ``c_m``.
    noise_grade_draws_ : ndarray of shape (n_chains, n_draws)
        Draws of the noise grade ``xi``, the log-odds of a +1 among noisy labels.
    clean_rate_draws_ : ndarray of shape (n_chains, n_draws)
        Draws of ``theta``, the probability that a label is true.
    clean_proba_draws_ : ndarray of shape (n_chains, n_draws, n_samples) or None
        ``P(w_n = 1 | c, xi, theta, y)`` at each kept sweep (float32); None unless
        ``store_row_draws``.
    clean_proba_ : ndarray of shape (n_samples,)
        Posterior probability that training label ``n`` is true, ``P(w_n = 1 | y)`` (the
        Rao-Blackwellised average of the conditional probabilities); compare VIBoost's phi_n.
    weights_ : ndarray of shape (n_classifiers,)
        Posterior mean of the weights.
    snr_ : float
        ``E[theta] / E[1 - theta]`` under the posterior; VIBoost's ``snr_`` is the same ratio
        under its variational posterior (``eta_1 / eta_2``).
    noise_grade_ : float
        Posterior mean of ``xi`` (VIBoost's ``noise_grade_`` is the mode of its q(xi)).
    evaluations_per_draw_ : float
        Mean number of evaluations of a weight's log density per exact draw (adaptive
        rejection sampling; a diagnostic of the sampler's cost).
    base_classifiers_ : list or None
        The distinct base classifiers of ``classifier``, in order of first selection:
        ``DecisionStump``, ``HistogramTree`` (tied leaves) or
        :class:`~viboost.gibbs.base_classifiers.LeafIndicator` (a leaf of a per-leaf tree);
        None without a classifier. Equal ones (a stump or tied tree, or its negation; a leaf of
        the same region) are listed once.
    base_classifier_names_ : list of str or None
        Their names, the ``classifier`` coordinate of :meth:`to_inference_data`: ``"stump{t}"``,
        ``"tree{t}"``, ``"tree{t}_leaf{l}"`` or ``"intercept"``, ``t`` the position in the
        classifier's ``estimators_`` and ``l`` the leaf's number in that tree (the first
        occurrence of a merged one); None without a classifier.
    classes_ : ndarray of shape (2,)
        Class labels; ``classes_[1]`` is the positive class (+1 in the paper).
    n_features_in_ : int
        Number of columns of ``X`` at fit.

    See Also
    --------
    viboost.VIBoostClassifier : the variational (stagewise) fit of the same model.

    References
    ----------
    .. [1] A. Lorbert, D. M. Blei, R. E. Schapire and P. J. Ramadge, "A Bayesian Boosting Model",
       arXiv:1209.1996, 2012 (section 4; supplement S.3, Algorithm 2).
    .. [2] W. R. Gilks and P. Wild, "Adaptive rejection sampling for Gibbs sampling", Applied
       Statistics 41(2), 1992.

    Examples
    --------
    >>> import numpy as np
    >>> from viboost.gibbs.sampler import GibbsSampler
    >>> rng = np.random.default_rng(0)
    >>> outputs = rng.choice([-1.0, 1.0], size=(300, 3))
    >>> y = np.where(rng.random(300) < 0.9, outputs[:, 0], -outputs[:, 0])  # 10% flipped
    >>> gibbs = GibbsSampler(n_draws=300, n_burnin=100, random_state=0).fit(outputs, y)
    >>> gibbs.weight_draws_.shape
    (4, 300, 3)
    >>> bool(gibbs.weights_[0] > 1.0 > abs(gibbs.weights_[1]))
    True
    >>> gibbs.predict(np.array([[1.0, -1.0, 1.0]]))
    array([1.])
    """

    # Fitted attributes whose types mypy cannot infer from their first assignment.
    n_features_in_: int
    base_classifiers_: list[DecisionStump | HistogramTree | LeafIndicator] | None
    base_classifier_names_: list[str] | None

    _parameter_constraints: dict = {
        "n_draws": [Interval(Integral, 1, None, closed="left")],
        "n_burnin": [Interval(Integral, 0, None, closed="left")],
        "thin": [Interval(Integral, 1, None, closed="left")],
        "n_chains": [Interval(Integral, 1, None, closed="left")],
        "weight_prior": [Interval(Real, 0, None, closed="neither")],
        "noise_grade_prior": [Interval(Real, 0, None, closed="neither")],
        "clean_prior": ["array-like"],
        "classifier": [HasMethods(["predict"]), None],
        "store_row_draws": ["boolean"],
        "n_jobs": [Integral, None],
        "random_state": ["random_state"],
    }

    def __init__(
        self,
        n_draws: int = 1000,
        *,
        n_burnin: int = 500,
        thin: int = 1,
        n_chains: int = 4,
        weight_prior: float = 1.0,
        noise_grade_prior: float = 1.0,
        clean_prior: tuple[float, float] = (1.0, 1.0),
        classifier: VIBoostClassifier | None = None,
        store_row_draws: bool = True,
        n_jobs: int | None = None,
        random_state: int | np.random.RandomState | None = None,
    ) -> None:
        self.n_draws = n_draws
        self.n_burnin = n_burnin
        self.thin = thin
        self.n_chains = n_chains
        self.weight_prior = weight_prior
        self.noise_grade_prior = noise_grade_prior
        self.clean_prior = clean_prior
        self.classifier = classifier
        self.store_row_draws = store_row_draws
        self.n_jobs = n_jobs
        self.random_state = random_state

    # ------------------------------------------------------------------ base classifiers
    def _base_outputs(self, X, fitting: bool):
        """The ``(n_samples, n_classifiers)`` matrix of ``f_m(x_n)`` in {-1.0, 0.0, +1.0}: a dense
        array, or a CSR matrix (sparse input, or the leaf indicators of a tree fit)."""
        clf = self.classifier
        if clf is None:
            outputs = check_array(
                X, accept_sparse=("csr", "csc"), dtype=np.float64, ensure_min_features=0
            )
            if sp.issparse(outputs):
                outputs = sp.csr_matrix(outputs)
            entries = outputs.data if sp.issparse(outputs) else outputs
            bad = entries[(entries != 1.0) & (entries != -1.0) & (entries != 0.0)]
            if bad.size:
                raise ValueError(
                    "Without a classifier, X must be the matrix of base-classifier outputs, "
                    f"with every entry -1, 0 or +1; found {float(bad[0])!r}."
                )
            n_columns = outputs.shape[1]
            expected = n_columns if fitting else self.n_features_in_
            what = "base-classifier outputs"
        else:
            if fitting:
                check_is_fitted(clf)
                _check_two_classes(getattr(clf, "classes_", None), "the classifier was fitted on")
                estimators = getattr(clf, "estimators_", None)
                if not estimators or not all(
                    isinstance(e, (DecisionStump, HistogramTree)) for e in estimators
                ):
                    raise TypeError(
                        "classifier must be a fitted VIBoostClassifier (or a "
                        f"sklearn.frozen.FrozenEstimator of one); got {type(clf).__name__}."
                    )
                learners, names = distinct_base_classifiers(estimators)
                self.base_classifiers_, self.base_classifier_names_ = learners, names
            if hasattr(clf, "_validate_X"):  # its checks, and its categorical encoding
                features = clf._validate_X(X, reset=False)
            else:
                features = check_array(X, dtype=np.float64, ensure_all_finite="allow-nan")
            n_columns, expected = features.shape[1], clf.n_features_in_
            what = "features (as the classifier)"
        if n_columns != expected:
            raise ValueError(
                f"X has {n_columns} columns, but GibbsSampler is expecting {expected} {what}."
            )
        if clf is not None:
            kept = self.base_classifiers_
            assert kept is not None  # set by fit whenever there is a classifier
            outputs = base_outputs(kept, features)
        return outputs if sp.issparse(outputs) else np.ascontiguousarray(outputs)

    # ------------------------------------------------------------------ fit
    def fit(self, X, y) -> GibbsSampler:
        """Run the chains on the training data.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_classifiers) or (n_samples, n_features)
            Base-classifier outputs in {-1, 0, +1} or, with ``classifier``, the features.
        y : array-like of shape (n_samples,)
            Labels of two classes (with ``classifier``: of its ``classes_``). Labels in
            {-1, +1} are the paper's signs and may all be of one class.

        Returns
        -------
        self : GibbsSampler
            The fitted sampler.

        Raises
        ------
        ValueError
            If ``y`` has more than two classes, or ``classifier`` was fitted on more than two:
            the sampler draws the binary model of Algorithm 2 (K classes: not yet).
        """
        self._validate_params()
        zeta = check_pair("clean_prior", self.clean_prior)
        if self.classifier is None:
            self.base_classifiers_ = self.base_classifier_names_ = None
        outputs = self._base_outputs(X, fitting=True)
        y = column_or_1d(y, warn=True)
        if y.shape[0] != outputs.shape[0]:
            raise ValueError(
                f"X has {outputs.shape[0]} rows but y has {y.shape[0]} labels; they must match."
            )
        if outputs.shape[0] == 0:
            raise ValueError("GibbsSampler needs at least one training row; X has none.")
        self.classes_ = self._label_classes(y)
        self.n_features_in_ = int(
            outputs.shape[1] if self.classifier is None else self.classifier.n_features_in_
        )
        y_signed = np.where(y == self.classes_[1], 1.0, -1.0)
        starts = self._chain_starts(outputs.shape, zeta)
        results = self._run_chains(outputs, y_signed, zeta, starts)
        self._record_draws(results, n_classifiers=outputs.shape[1])
        self._y_signed = y_signed
        return self

    def _label_classes(self, y: np.ndarray) -> np.ndarray:
        """The two classes of ``y`` (those of ``classifier`` when given); labels in {-1, +1}
        may all be of one class."""
        check_classification_targets(y)
        if self.classifier is not None:
            classes = self.classifier.classes_
            unknown = np.setdiff1d(np.unique(y), classes)
            if unknown.size:
                raise ValueError(
                    f"y has labels {unknown.tolist()} that the classifier was not fitted on "
                    f"(its classes are {classes.tolist()})."
                )
            return classes
        classes = np.unique(y)
        if classes.size < 2 and np.isin(classes, [-1, 1]).all():
            # The paper's signs: data of one class are data all the same.
            classes = np.array([-1, 1], dtype=classes.dtype)
        _check_two_classes(classes, "y has")
        if classes.size != 2:
            raise ValueError(
                f"GibbsSampler needs labels of exactly 2 classes; y has {classes.size} "
                f"({classes.tolist()[:5]})."
            )
        return classes

    def _chain_starts(self, shape: tuple[int, int], zeta: tuple[float, float]) -> list[tuple]:
        """Per chain, a draw of the prior (section 4, steps 1, 4-6) as its starting point and
        the chain's own Generator, all from ``random_state`` in chain order."""
        rs = check_random_state(self.random_state)
        # random_state's constraint ("random_state") admits no Generator: this is a RandomState.
        assert isinstance(rs, np.random.RandomState)
        n_rows, n_classifiers = shape
        mu0, mu0_noise = float(self.weight_prior), float(self.noise_grade_prior)
        starts = []
        for _ in range(self.n_chains):
            c0 = np.atleast_1d(
                sample_two_term_vlog(mu0, mu0, size=n_classifiers, random_state=rs)
            ).astype(np.float64)
            xi0 = float(sample_two_term_vlog(mu0_noise, mu0_noise, random_state=rs))
            # theta ~ Beta(zeta_1, zeta_2): its log-odds are a two-term v-Log(zeta_2, zeta_1).
            logit_theta0 = float(sample_two_term_vlog(zeta[1], zeta[0], random_state=rs))
            clean0 = (rs.random_sample(n_rows) < expit(logit_theta0)).astype(np.uint8)
            # The chain's own Generator for the compiled kernel, seeded from rs (one draw).
            starts.append((c0, xi0, logit_theta0, clean0, spawn_generator(rs)))
        return starts

    def _run_chains(
        self,
        outputs: np.ndarray,
        y_signed: np.ndarray,
        zeta: tuple[float, float],
        starts: list[tuple],
    ) -> list[tuple]:
        """Run each chain of Algorithm 2 from its start; one tuple of outputs per chain."""
        n_rows, n_classifiers = outputs.shape
        indptr, indices, values, dense = _column_storage(outputs)
        mu0, mu0_noise = float(self.weight_prior), float(self.noise_grade_prior)
        n_draws, store = int(self.n_draws), bool(self.store_row_draws)
        # Threads: one per running chain, at most n_jobs in all; a chain's kernel is serial, and
        # any numba threads inside a chain get the chains' leftover share (the count is
        # thread-local, so each worker thread sets its own, for this call only).
        threads = resolve_n_jobs(self.n_jobs)
        workers = min(threads, self.n_chains)
        inner = max(1, threads // workers)

        def one_chain(start):
            c0, xi0, logit_theta0, clean0, chain_rng = start
            out_c = np.empty((n_draws, n_classifiers))
            out_xi = np.empty(n_draws)
            out_logit = np.empty(n_draws)
            out_rows = np.empty((n_draws if store else 0, n_rows), dtype=np.float32)
            proba_sum = np.zeros(n_rows)
            out_evals = np.empty(n_draws)
            with numba_threads(inner):
                run_chain(
                    indptr, indices, values, dense, y_signed, c0.copy(), xi0, logit_theta0,
                    clean0.copy(),
                    mu0, mu0_noise, zeta[0], zeta[1],
                    int(self.n_burnin), n_draws, int(self.thin), chain_rng,
                    out_c, out_xi, out_logit, out_rows, proba_sum, out_evals,
                )  # fmt: skip
            rows = out_rows if store else None
            return out_c, out_xi, out_logit, rows, proba_sum, out_evals

        # Threads whatever joblib backend is configured: the chains share the arrays above.
        return Parallel(n_jobs=workers, require="sharedmem")(
            delayed(one_chain)(start) for start in starts
        )

    def _record_draws(self, results: list[tuple], n_classifiers: int) -> None:
        """The fitted attributes from the chains' outputs."""
        self.weight_draws_ = np.stack([r[0] for r in results])
        self.noise_grade_draws_ = np.stack([r[1] for r in results])
        logit_theta = np.stack([r[2] for r in results])
        self.clean_rate_draws_ = expit(logit_theta)
        self._logit_clean_rate = logit_theta
        store = bool(self.store_row_draws)
        self.clean_proba_draws_ = np.stack([r[3] for r in results]) if store else None
        n_kept = self.n_chains * int(self.n_draws)
        self.clean_proba_ = np.sum([r[4] for r in results], axis=0) / n_kept
        evals = np.stack([r[5] for r in results])
        self._density_evaluations = evals
        self.evaluations_per_draw_ = (
            float(evals.mean() / n_classifiers) if n_classifiers else float("nan")
        )
        self.weights_ = self.weight_draws_.mean(axis=(0, 1))
        # E[theta] / E[1 - theta], with 1 - theta = expit(-logit) computed without cancellation.
        self.snr_ = float(self.clean_rate_draws_.mean() / expit(-logit_theta).mean())
        self.noise_grade_ = float(self.noise_grade_draws_.mean())

    # ------------------------------------------------------------------ ArviZ
    def to_inference_data(self, include_rows: bool = True):
        """The draws in ArviZ's format: an ``xarray.DataTree`` (ArviZ 1.x) or an
        ``arviz.InferenceData`` (ArviZ 0.2x), whichever the installed ArviZ uses.

        The ``posterior`` group holds ``c`` (dims ``chain, draw, classifier``; the classifiers
        are numbered, or, with ``classifier``, named by ``base_classifier_names_``, e.g.
        ``"intercept"`` and ``"tree3_leaf1"`` for a tree fit), ``xi`` (the noise
        grade), ``theta`` (the probability that a label is true), ``snr``
        (``theta / (1 - theta)``) and, when row draws were stored and ``include_rows``,
        ``clean_proba`` (dims ``chain, draw, row``: ``P(w_n = 1 | c, xi, theta, y)``, whose mean
        over draws is ``clean_proba_``). ``sample_stats`` holds ``density_evaluations`` (per
        sweep, of the weights' log densities) and ``observed_data`` the labels ``y`` in {-1, +1}
        (dim ``row``). The groups, variables and coordinates are the same under both ArviZ
        versions; the priors are attributes of each group (and, for a DataTree, of its root).

        Parameters
        ----------
        include_rows : bool, default=True
            Include the per-row variable ``clean_proba`` (it has ``n_samples`` components).

        Returns
        -------
        xarray.DataTree or arviz.InferenceData
            Accepted by ``arviz.summary``, ``arviz.ess``, ``arviz.rhat`` and the trace plots
            (``arviz.plot_trace_dist`` in ArviZ 1.x, ``arviz.plot_trace`` in 0.2x).

        Examples
        --------
        >>> import numpy as np
        >>> from viboost.gibbs.sampler import GibbsSampler
        >>> rng = np.random.default_rng(0)
        >>> outputs = rng.choice([-1.0, 1.0], size=(100, 2))
        >>> gibbs = GibbsSampler(200, n_burnin=50, random_state=0).fit(outputs, outputs[:, 0])
        >>> idata = gibbs.to_inference_data()
        >>> sorted(idata.posterior.data_vars)
        ['c', 'clean_proba', 'snr', 'theta', 'xi']
        >>> dict(idata.posterior["c"].sizes)
        {'chain': 4, 'draw': 200, 'classifier': 2}
        """
        check_is_fitted(self)
        arviz = import_arviz()

        with np.errstate(over="ignore"):  # a ratio beyond the float range is inf
            snr = np.exp(self._logit_clean_rate)
        posterior = {
            "c": self.weight_draws_,
            "xi": self.noise_grade_draws_,
            "theta": self.clean_rate_draws_,
            "snr": snr,
        }
        if include_rows and self.clean_proba_draws_ is not None:
            posterior["clean_proba"] = self.clean_proba_draws_
        groups = {
            "posterior": posterior,
            "sample_stats": {"density_evaluations": self._density_evaluations},
            "observed_data": {"y": self._y_signed},
        }
        dims = {"c": ["classifier"], "clean_proba": ["row"], "y": ["row"]}
        n_rows = self._y_signed.shape[0]
        names = getattr(self, "base_classifier_names_", None)
        classifiers = np.arange(self.weight_draws_.shape[2]) if names is None else np.array(names)
        coords = {"classifier": classifiers, "row": np.arange(n_rows)}
        attrs = {
            "inference_library": "viboost",
            "model": "Lorbert et al. noise model, section 4; Gibbs sampler, Algorithm 2",
            "weight_prior": float(self.weight_prior),
            "noise_grade_prior": float(self.noise_grade_prior),
            "clean_prior": list(check_pair("clean_prior", self.clean_prior)),
        }
        if arviz_uses_datatree(arviz):
            # ArviZ 1.x (arviz_base.from_dict): one dict of groups, attributes per group; the
            # "data" groups get no chain/draw dims.
            group_attrs = {"/": dict(attrs)} | {group: dict(attrs) for group in groups}
            return arviz.from_dict(groups, coords=coords, dims=dims, attrs=group_attrs)
        return arviz.from_dict(**groups, coords=coords, dims=dims, attrs=attrs)

    # ------------------------------------------------------------------ prediction
    def decision_function(self, X) -> np.ndarray:
        """Posterior mean of ``F(x) = sum_m c_m f_m(x)``; positive favours ``classes_[1]``.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)
            Base-classifier outputs or, with ``classifier``, features.

        Returns
        -------
        ndarray of shape (n_samples,)
            The posterior mean log-odds of a true +1 label.
        """
        check_is_fitted(self)
        return np.asarray(self._base_outputs(X, fitting=False) @ self.weights_).reshape(-1)

    def predict_proba(self, X) -> np.ndarray:
        """Posterior-mean probability of each class for a *true* label.

        ``P(y = +1 | x, data) = E[sigmoid(F(x))]``, the average over all kept draws of all chains
        (section 2's label model given the weights); the noise process is left out, as in
        :meth:`viboost.VIBoostClassifier.predict_proba`.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)
            Base-classifier outputs or, with ``classifier``, features.

        Returns
        -------
        ndarray of shape (n_samples, 2)
            Columns in the order of ``classes_``.
        """
        check_is_fitted(self)
        outputs = self._base_outputs(X, fitting=False)
        draws = self.weight_draws_.reshape(-1, self.weight_draws_.shape[2]).T  # (M, S)
        proba = np.empty(outputs.shape[0])
        block = max(1, _PREDICT_BLOCK_ELEMENTS // max(1, draws.shape[1]))
        for start in range(0, outputs.shape[0], block):
            margins = np.asarray(outputs[start : start + block] @ draws)
            proba[start : start + block] = expit(margins).mean(axis=1)
        return np.column_stack([1.0 - proba, proba])

    def predict(self, X) -> np.ndarray:
        """``classes_[1]`` where the posterior-mean probability of +1 exceeds 1/2.

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)
            Base-classifier outputs or, with ``classifier``, features.

        Returns
        -------
        ndarray of shape (n_samples,)
            Predicted class labels.
        """
        check_is_fitted(self)
        return self.classes_[(self.predict_proba(X)[:, 1] > 0.5).astype(int)]
