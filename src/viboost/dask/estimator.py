"""VIBoost on a Dask cluster: :class:`DaskVIBoostClassifier`.

The estimator takes dask arrays or dask dataframes and fits, on the workers of a
``distributed.Client``, the same model as :class:`viboost.VIBoostClassifier` on the same data
(both presets). ``fit``:

1. **checks** the input before any work is scheduled (non-numeric dataframe columns), then in
   one pass over the blocks (:mod:`viboost.dask.blocks`): sizes, labels, infinite values,
   missing labels and bad sample weights;
2. **bins** the features once: edges from a uniform sample of at most 200,000 weighted rows
   drawn exactly as the in-memory binner draws it (the sketch; plus, for features with few
   distinct values, a pass that checks the sample saw them all), then every block is binned
   on its worker and kept there (``uint8``), with its labels and weights;
3. **boosts**: the same :class:`~viboost.boosting.booster.Booster` as in memory, over the
   blocks (:class:`~viboost.dask.engine.BlockRows`, which moves only histograms, knot moments
   and scalars to the client; trees are grown on the client from the blocks' node
   histograms); with the robust preset, the same driver
   (:class:`~viboost.noise_fit.cross_fit.CrossFitter`): one ensemble per fold in lockstep, the
   out-of-fold margins gathered every 10 rounds to calibrate the noise model and choose the
   number of rounds, then the final booster. K > 2 classes are fitted as in memory: one
   ensemble per class per fold (the blocks hold class indices and couple each fold's classes
   through the softmax), the K-class noise model calibrated on the out-of-fold margins ``F``.

Predictions are lazy: ``decision_function``, ``predict`` and ``predict_proba`` map the fitted
ensemble (stumps or trees) over the blocks of a dask collection.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable
from dataclasses import replace
from numbers import Integral, Real
from typing import Any

import numpy as np
from scipy.special import expit, log_expit, log_softmax, softmax
from sklearn.base import clone
from sklearn.utils._param_validation import Interval, StrOptions
from sklearn.utils.multiclass import check_classification_targets
from sklearn.utils.validation import check_is_fitted

from viboost._utils.validation import check_classes, check_pair, reject_non_numeric_columns
from viboost.boosting.binning import FeatureBinner, subsample_ranks
from viboost.boosting.booster import Booster, run_rounds
from viboost.boosting.grower import TreeSettings
from viboost.boosting.predictor import EnsemblePredictor
from viboost.dask import blocks
from viboost.dask.engine import BlockRows, BlockTasks
from viboost.dask.service import BlockService, ServiceLost
from viboost.estimator import VIBoostClassifier
from viboost.noise_fit.calibration import flip_rates_from_sums
from viboost.noise_fit.class_calibration import joint_of
from viboost.noise_fit.cross_fit import MakeRows, cross_fit_folds
from viboost.presets import FitPlan
from viboost.variational import ModelPriors, VariationalState
from viboost.variational.state import CleanLogOdds

__all__ = ["DaskVIBoostClassifier"]

#: The per-row fitted attributes, dask arrays chunked as the training rows.
_PER_ROW = (
    "cv_decision_function_", "clean_proba_", "mislabel_proba_", "true_class_proba_",
    "refit_weight_",
)  # fmt: skip
#: The parameters of the distributed fit only (not :class:`viboost.VIBoostClassifier`'s).
_DASK_PARAMETERS = ("client", "block_size", "timeout", "transport")
#: Bytes per row and boosted ensemble that a block's state takes on its worker (margins, their
#: cache, multiplicities, search weights, a tree's partition and statistics), for ``"auto"``.
_STATE_BYTES_PER_ROW = 96
#: The workers' protocols over which the rounds may take direct connections (plain TCP
#: sockets): not "tls", whose traffic the direct connections would not encrypt.
_DIRECT_SCHEMES = frozenset({"tcp", "inproc"})


class DaskVIBoostClassifier(VIBoostClassifier):
    """VIBoost fitted on a Dask cluster, for data that does not fit one machine.

    The model, its parameters and its fitted attributes are those of
    :class:`viboost.VIBoostClassifier` (see there); on the same data it fits the same base
    learners (stumps, or trees with the same splits), with leaf values, alphas, SNR and noise
    grade equal up to the rounding of sums taken in another order (well within 1e-9
    relative); only splits whose scores tie to rounding may go the other way. ``X`` is a dask
    array or a dask dataframe (numpy and pandas input is wrapped), ``y`` and
    ``sample_weight`` dask arrays or series with the same rows.

    The rows are cut into blocks of ``block_size`` rows that depend only on the shape of the
    data. Each round every block returns a histogram of its stump-search weights (or, for
    trees, the histograms of the nodes the client splits, level by level) and the knot
    moments of its rows (:mod:`viboost.dask.engine`), and the client adds them up in block
    order. The result is therefore bit for bit the same for any number of workers and any
    partitioning of the input.

    Additional parameters
    ---------------------
    client : distributed.Client or None, default=None
        The cluster to fit on; None uses the current client (``distributed.get_client()``).
    block_size : int or None, default=None
        Rows per block; None: 8 MiB of binned features, between 4,096 and 1,048,576 rows.
    timeout : float, default=600
        Seconds to wait for one distributed step (one pass over the blocks) before the fit
        stops with an error; a fit never waits without bound on a lost cluster.
    transport : {"auto", "direct", "scheduler"}, default="auto"
        How the client reaches the blocks during the boosting rounds. ``"direct"``: one
        long-lived task per worker thread holds that thread's blocks and serves the rounds
        over a TCP connection from the client (:mod:`viboost.dask.service`; a pass costs well
        under a millisecond instead of a trip through the scheduler), as LightGBM's and
        XGBoost's Dask interfaces do; the client must be able to open connections to the
        workers' hosts (it does for dask's own results too), and the workers must be
        reached over plain TCP (on a TLS cluster the connections would not be encrypted:
        ``"direct"`` is refused there). ``"scheduler"``: every pass is
        dask tasks; the blocks and their states stay in dask's memory, which may spill them
        to disk (out-of-core data). ``"auto"``: ``"direct"`` when the blocks and the
        boosters' states take at most half of every worker's memory limit, else
        ``"scheduler"``. The fit is bit for bit the same either way; if a direct connection
        fails (a worker lost mid-fit, a firewall), the fit warns and runs again through the
        scheduler.

    Attributes
    ----------
    transport_ : {"direct", "scheduler"}
        How the rounds of the last fit reached the blocks (see ``transport``).

    The other fitted attributes are :class:`viboost.VIBoostClassifier`'s.

    Notes
    -----
    - K > 2 classes are fitted as in memory (one ensemble per class, cross-fitted, the robust
      preset; ``noise_fit="in-sample"`` is refused with the in-memory estimator's error), with
      the same fitted attributes (``noise_matrix_``, ``label_joint_``, ``true_class_proba_``,
      ``noise_channel_``, ...). Two-class fits (either preset) carry them too, as in memory
      (``noise_channel_="independent"``; NaN joints without the noise model); the in-sample
      fit computes ``true_class_proba_`` on the blocks and adds up ``label_joint_`` from
      them. ``true_class_proba_`` is a dask array.
    - ``max_bins=None`` (the exhaustive search) and ``warm_start=True`` are not supported;
      ``n_jobs`` is ignored (each block runs on one worker thread).
    - The robust preset gathers the out-of-fold margins of every row (with labels and
      weights: 24 bytes a row, 8 K + 16 for K classes) to the client every 10 rounds to
      calibrate the noise model; the features never leave the workers. ``clean_proba_``,
      ``mislabel_proba_``, ``cv_decision_function_`` and ``refit_weight_`` are dask arrays
      chunked as the training rows.
    - If a worker is lost mid-fit, dask recomputes its blocks from the input and the fit
      goes on with the same result (on direct connections, the fit warns and runs again
      through the scheduler); if workers keep dying, or nothing arrives within ``timeout``,
      ``fit`` raises a RuntimeError.

    Examples
    --------
    >>> import dask.array as da
    >>> import numpy as np
    >>> from distributed import Client
    >>> from viboost.dask import DaskVIBoostClassifier
    >>> client = Client(processes=False, n_workers=1, dashboard_address=None)
    >>> rng = np.random.default_rng(0)
    >>> X = rng.normal(size=(2000, 3))
    >>> y = (X[:, 0] > 0).astype(int)
    >>> dX, dy = da.from_array(X, chunks=500), da.from_array(y, chunks=500)
    >>> clf = DaskVIBoostClassifier(20, preset="paper", client=client).fit(dX, dy)
    >>> float((clf.predict(dX).compute() == y).mean()) > 0.95
    True
    >>> client.close()
    """

    _parameter_constraints: dict = {
        **VIBoostClassifier._parameter_constraints,
        "max_bins": [Interval(Integral, 2, 255, closed="both")],
        "client": "no_validation",
        "block_size": [Interval(Integral, 1, None, closed="left"), None],
        "timeout": [Interval(Real, 0, None, closed="neither")],
        "transport": [StrOptions({"auto", "direct", "scheduler"})],
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
        max_bins: int = 255,
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
        client: Any = None,
        block_size: int | None = None,
        timeout: float = 600.0,
        transport: str = "auto",
    ) -> None:
        super().__init__(
            n_estimators,
            preset=preset,
            learning_rate=learning_rate,
            weight_prior=weight_prior,
            noise_grade_prior=noise_grade_prior,
            clean_prior=clean_prior,
            tau=tau,
            init_clean_proba=init_clean_proba,
            init_eta=init_eta,
            noise_model=noise_model,
            alpha=alpha,
            noise_fit=noise_fit,
            cv=cv,
            n_iter_no_change=n_iter_no_change,
            tol=tol,
            max_vi_iter=max_vi_iter,
            fixed_vi_iter=fixed_vi_iter,
            update_alpha_once=update_alpha_once,
            warm_start=warm_start,
            max_bins=max_bins,
            max_leaf_nodes=max_leaf_nodes,
            max_depth=max_depth,
            min_samples_leaf=min_samples_leaf,
            leaf_weights=leaf_weights,
            noise_channel=noise_channel,
            mislabeled=mislabeled,
            final_model=final_model,
            n_jobs=n_jobs,
            random_state=random_state,
            verbose=verbose,
        )
        self.client = client
        self.block_size = block_size
        self.timeout = timeout
        self.transport = transport

    def __sklearn_clone__(self) -> DaskVIBoostClassifier:
        """An unfitted copy with the same parameters and the same client (a client cannot be
        deep-copied), so that ``clone`` and the model-selection tools work."""
        params = self.get_params(deep=False)
        client = params.pop("client")
        return type(self)(**{k: clone(v, safe=False) for k, v in params.items()}, client=client)

    def __getstate__(self) -> dict:
        """Pickle without the client, with the per-row attributes computed."""
        state = super().__getstate__()
        state["client"] = None
        for name in _PER_ROW:
            if name in state and _is_dask_collection(state[name]):
                state[name] = np.asarray(state[name].compute())
        return state

    def _get_client(self) -> Any:
        if self.client is not None:
            return self.client
        from distributed import get_client

        try:
            return get_client()
        except ValueError as error:
            raise ValueError(
                "DaskVIBoostClassifier needs a distributed.Client: pass client=, or create one "
                "first (distributed.Client(...) or Client('tcp://scheduler:8786'))."
            ) from error

    # ------------------------------------------------------------------ fitting
    def fit(self, X, y, sample_weight=None) -> DaskVIBoostClassifier:
        """Fit on the cluster (see the class docstring); the arguments of
        :meth:`viboost.VIBoostClassifier.fit`, as dask collections."""
        self._validate_params()
        if self.warm_start:
            raise ValueError("DaskVIBoostClassifier does not support warm_start=True.")
        clean_prior = check_pair("clean_prior", self.clean_prior)
        init_eta = check_pair("init_eta", self.init_eta)
        # Non-numeric columns are refused before anything is scheduled.
        reject_non_numeric_columns(X, type(self).__name__)
        client = self._get_client()
        with client.as_current():  # partition lengths are counted on this fit's cluster
            X, feature_names = _as_matrix(X)
            y = _as_vector(y, "y", X)
            sample_weight = (
                _ones_like_rows(X)
                if sample_weight is None
                else _as_vector(sample_weight, "sample_weight", X)
            )
        tasks = BlockTasks(client, self.timeout)
        n_rows, n_features = X.shape
        if n_features == 0:
            raise ValueError("X has 0 features; DaskVIBoostClassifier needs at least one.")
        self._train_chunks = X.chunks[0]
        self._n_rows = n_rows
        sizes = blocks.block_sizes(n_rows, n_features, self.block_size)
        # The raw blocks are computed once (the input read, cut into blocks) for the three
        # passes before the rounds (checks, the binner's sample, binning), and released once
        # binned: each pass would otherwise read the input and cut it again.
        blocked = client.persist(
            [X.rechunk((sizes, n_features)), y.rechunk((sizes,)), sample_weight.rechunk((sizes,))]
        )
        raw = tuple(part.to_delayed().ravel().tolist() for part in blocked)
        summaries = tasks.gather(tasks.compute(blocks.summarize_block, *raw))
        classes = self._check_summaries(summaries)
        total_weight = float(sum(summary.total_weight for summary in summaries))
        if classes.size > 2:  # the checks of the in-memory K-class fit, before any work
            plan = self._class_plan(classes, _class_counts(classes, summaries), total_weight)

        binner = self._fit_binner(tasks, raw, summaries)
        if classes.size > 2:
            training = tasks.compute(blocks.build_block, *raw, binner=binner, classes=classes)
        else:
            training = tasks.compute(blocks.build_block, *raw, binner=binner, positive=classes[-1])
        # Balanced over the workers' threads, which then run one task each per pass.
        training = tasks.place(training, sizes)
        del raw, blocked  # (binned: the raw blocks are released)

        self.n_features_in_ = n_features
        if feature_names is not None:
            self.feature_names_in_ = feature_names
        elif hasattr(self, "feature_names_in_"):
            del self.feature_names_in_
        self.classes_ = classes
        priors = self._model_priors(clean_prior)
        if classes.size > 2:
            self._fit_classes_blocks(
                tasks, training, binner, sizes, n_features, priors, plan, init_eta
            )
            return self
        plan = self._resolve_plan(total_weight)
        tree = self._tree_settings(plan)
        n_active = sum(summary.n_active for summary in summaries)
        # The training blocks are released when this call returns (nothing else holds them).
        folds = None
        if plan.noise_fit == "cross-fit":
            pairs = tasks.run(blocks.labels_and_weights, training)
            y_signed = np.concatenate([pair[0] for pair in pairs])
            weights = np.concatenate([pair[1] for pair in pairs])
            folds = cross_fit_folds(self.cv, y_signed, weights > 0, self.random_state)
            if folds is None:  # too few rows in a class (warned)
                plan = replace(plan, noise_fit="in-sample")
        if folds is None:

            def in_sample(tasks: Any, training: list) -> None:
                self._fit_in_sample_blocks(
                    tasks, training, binner, sizes, n_active, priors, plan, init_eta, tree
                )

            self._on_blocks(tasks, training, sizes, n_features, 1, in_sample)
        else:

            def cross_fit(tasks: Any, training: list) -> Any:
                make_rows = _block_rows(tasks, training, binner, sizes, tree)
                fitter = self._cross_fitter(plan, priors, init_eta, label=" (dask)")
                return fitter.fit(make_rows, y_signed, weights, folds)

            result = self._on_blocks(tasks, training, sizes, n_features, len(folds), cross_fit)
            self._store_cross_fit(result, y_signed, weights, priors)
            self._set_label_posteriors((y_signed > 0).astype(np.intp), weights)
            for name in _PER_ROW:
                setattr(self, name, self._rows_array(getattr(self, name), sizes))
        self.plan_ = plan
        return self

    def _on_blocks(
        self,
        tasks: BlockTasks,
        training: list,
        sizes: tuple[int, ...],
        n_features: int,
        n_ensembles: int,
        body: Callable[[Any, list], Any],
    ) -> Any:
        """``body(tasks, training)``: the boosting rounds over the blocks, through the direct
        services (:class:`~viboost.dask.service.BlockService`) where ``transport`` chooses them,
        else through the scheduler. If a direct connection fails, warn and run ``body`` again
        through the scheduler (the same model: the same calls on the same blocks)."""
        if self._direct_transport(tasks, sizes, n_features, n_ensembles):
            try:
                with BlockService(tasks, training) as service:
                    out = body(service, service.training)
                self.transport_ = "direct"
                return out
            except ServiceLost as error:
                warnings.warn(
                    f"DaskVIBoostClassifier: the direct connection to the workers failed "
                    f"({error}); the fit runs again through the scheduler "
                    "(transport='scheduler').",
                    RuntimeWarning,
                    stacklevel=3,
                )
        out = body(tasks, training)
        self.transport_ = "scheduler"
        return out

    def _direct_transport(
        self, tasks: BlockTasks, sizes: tuple[int, ...], n_features: int, n_ensembles: int
    ) -> bool:
        """Whether the rounds run on direct services: ``transport="direct"``, or ``"auto"``
        and every worker's blocks (binned twice, row- and column-major, with labels and
        weights) and their ``n_ensembles`` states fit in half its memory limit; never for
        workers reached over TLS (or another protocol than plain TCP)."""
        if self.transport == "scheduler" or tasks.homes is None:
            return False
        schemes = {worker.split("://", 1)[0] for worker, _ in tasks.homes}
        if not schemes <= _DIRECT_SCHEMES:
            if self.transport == "direct":
                raise ValueError(
                    f"transport='direct' needs workers reached over plain TCP; this cluster's "
                    f"use {', '.join(sorted(schemes - _DIRECT_SCHEMES))}:// (the direct "
                    "connections would not be encrypted as its traffic is). Use "
                    "transport='auto' or 'scheduler'."
                )
            return False
        if self.transport == "direct":
            return True
        rows: dict[str, int] = {}
        for size, (worker, _) in zip(sizes, tasks.homes, strict=True):
            rows[worker] = rows.get(worker, 0) + int(size)
        info = tasks.client.scheduler_info(n_workers=-1)["workers"]
        per_row = 2 * n_features + 16 + n_ensembles * _STATE_BYTES_PER_ROW
        for worker, n_rows in rows.items():
            limit = int(info.get(worker, {}).get("memory_limit") or 0)
            if limit and n_rows * per_row > limit / 2:
                return False
        return True

    def _tree_settings(self, plan: FitPlan) -> TreeSettings | None:
        """The trees of this fit, as :meth:`VIBoostClassifier._learner_search` grows them in
        memory; None for the paper's decision stumps."""
        return plan.tree_settings(float(self.weight_prior))

    def _check_summaries(self, summaries: list[blocks.BlockSummary]) -> np.ndarray:
        """The classes, after the checks of the in-memory ``fit`` on the summaries."""
        if any(s.infinite_features for s in summaries):
            raise ValueError("Input X contains infinity or a value too large for dtype('float64').")
        if any(s.missing_labels for s in summaries):
            raise ValueError("Input y contains NaN (or None): every row needs a label.")
        if any(s.bad_weights for s in summaries):
            raise ValueError(
                "sample_weight must be finite and nonnegative; it has negative, NaN or "
                "infinite values."
            )
        n_rows = sum(s.n_rows for s in summaries)
        if n_rows == 0:
            raise ValueError("Found array with 0 sample(s) while a minimum of 1 is required.")
        classes = np.unique(np.concatenate([s.labels for s in summaries]))
        check_classification_targets(classes)
        check_classes(classes, type(self).__name__)
        if classes.size > 2:  # checked on the counts of each class (_class_plan)
            return classes
        active = np.unique(np.concatenate([s.active_labels for s in summaries]))
        if active.size < 2:
            raise ValueError(
                f"{type(self).__name__} needs both classes to carry positive sample weight; "
                f"only class {active[0]!r} does."
            )
        return classes

    def _fit_binner(
        self, tasks: BlockTasks, raw: tuple[list, list, list], summaries: list
    ) -> FeatureBinner:
        """The bin edges, from the same sample of weighted rows as the in-memory binner."""
        binner = FeatureBinner(max_bins=self.max_bins, random_state=self.random_state)
        counts = np.array([s.n_active for s in summaries])
        starts = np.concatenate([[0], np.cumsum(counts)])
        ranks = subsample_ranks(int(starts[-1]), binner.subsample, binner.random_state)
        if ranks is None:
            local = [np.arange(c) for c in counts]
        else:
            cuts = np.searchsorted(ranks, starts)
            local = [ranks[cuts[b] : cuts[b + 1]] - starts[b] for b in range(counts.size)]
        X_parts, _, s_parts = raw
        sample = np.concatenate(
            tasks.gather(tasks.compute(blocks.sample_block, X_parts, s_parts, local))
        )

        def find_absent(features: np.ndarray, table: np.ndarray) -> np.ndarray:
            flags = tasks.gather(
                tasks.compute(
                    blocks.absent_in_block, X_parts, s_parts, features=features, table=table
                )
            )
            return np.any(flags, axis=0)

        def distinct_values(feature: int) -> np.ndarray:
            parts = tasks.gather(
                tasks.compute(blocks.distinct_in_block, X_parts, s_parts, feature=feature)
            )
            return np.unique(np.concatenate(parts))

        return binner.fit_sample(sample, ranks is not None, find_absent, distinct_values)

    def _fit_in_sample_blocks(
        self,
        tasks: BlockTasks,
        training: list,
        binner: FeatureBinner,
        sizes: tuple[int, ...],
        n_active: int,
        priors: ModelPriors,
        plan: FitPlan,
        init_eta: tuple[float, float],
        tree: TreeSettings | None,
    ) -> None:
        """Rounds of Algorithm 1 on all rows; the noise statistics of the in-sample q(w) and the
        posteriors of the true classes, computed on the blocks."""
        # The state before the first round (initial_state), its omega summed over the blocks.
        phi0 = self._initial_clean_proba(plan)
        parts = tasks.run(blocks.noise_weight_by_class, training, noise_proba=1.0 - phi0)
        state = VariationalState(
            eta=np.array(init_eta),
            omega=priors.noise_grade + np.sum(parts, axis=0),
            clean=CleanLogOdds.constant(phi0),
        )
        rows = BlockRows(tasks, training, binner, [n_active], tree=tree)
        booster = Booster(rows, [state], priors, self._round_settings(plan), plan.learning_rate)
        run_rounds(booster, plan.n_estimators, "VIBoost (dask)", self.verbose)
        n_rows = int(sum(sizes))
        self._n_train = n_rows
        self._store_booster(booster, priors)
        parts = tasks.submit(
            blocks.in_sample_noise, training, rows.finish(), clean=self._state.clean
        )
        posteriors = tasks.submit(
            _label_posteriors, training, parts, noise_model=bool(self.noise_model)
        )
        # Only the blocks' sums come to the client; the per-row parts stay on the workers.
        sums = np.sum(tasks.run(_item, parts, index=2), 0)
        joints = tasks.run(_item, posteriors, index=1) if self.noise_model else None
        phi, mislabel, true_class = tasks.finish(
            tasks.submit(_item, parts, index=0),
            tasks.submit(_item, parts, index=1),
            tasks.submit(_item, posteriors, index=0),
        )
        self.clean_proba_ = self._rows_array(phi, sizes)
        self.cv_rounds_ = np.empty(0, dtype=int)
        self.cv_best_rounds_ = 0
        self.cv_n_splits_ = 0
        self.cv_n_passes_ = 0
        self.cv_log_likelihood_ = np.empty(0)
        self.refit_weight_ = None
        self.noise_calibration_ = None
        self.cv_decision_function_ = self._rows_array(None, sizes, fill=np.nan)
        if self.noise_model:
            self.mislabel_proba_ = self._rows_array(mislabel, sizes)
            rates = flip_rates_from_sums(sums)
        else:
            self.mislabel_proba_ = self._rows_array(None, sizes, fill=0.0)
            rates = np.full(3, np.nan)
        self._store_flip_rates(rates, None)
        self.true_class_proba_ = self._rows_array(true_class, sizes, columns=2)
        joint = None
        if self.noise_model:  # the joint of all rows: the blocks' joints, weighted by their weight
            block_joints, block_weights = zip(*joints, strict=True)
            joint = np.average(np.array(block_joints), axis=0, weights=block_weights)
        self._store_binary_joint(joint)

    def _fit_classes_blocks(
        self,
        tasks: BlockTasks,
        training: list,
        binner: FeatureBinner,
        sizes: tuple[int, ...],
        n_features: int,
        priors: ModelPriors,
        plan: FitPlan,
        init_eta: tuple[float, float],
    ) -> None:
        """K > 2 classes: the in-memory K-class fit (``VIBoostClassifier._fit_classes``) over
        the blocks: the cross-fit with one ensemble per class per fold, coupled on the blocks
        (:func:`~viboost.dask.blocks.reweight_classes`), and the same fitted attributes, the
        per-row ones as dask arrays chunked as the training rows."""
        n_classes = self.classes_.size
        pairs = tasks.run(blocks.labels_and_weights, training)
        y_index = np.concatenate([pair[0] for pair in pairs])
        weights = np.concatenate([pair[1] for pair in pairs])
        folds = cross_fit_folds(self.cv, y_index, weights > 0, self.random_state)

        def cross_fit(tasks: Any, training: list) -> Any:
            make_rows = _block_rows(
                tasks, training, binner, sizes, self._tree_settings(plan), n_classes=n_classes
            )
            fitter = self._cross_fitter(
                plan, priors, init_eta, label=" (dask)", n_classes=n_classes
            )
            return fitter.fit(make_rows, y_index, weights, folds)

        n_ensembles = len(folds) * n_classes
        result = self._on_blocks(tasks, training, sizes, n_features, n_ensembles, cross_fit)
        self._store_class_fit(result, self.classes_, y_index, weights, priors, plan)
        for name in _PER_ROW:
            setattr(self, name, self._rows_array(getattr(self, name), sizes))

    def _rows_array(
        self, values: Any, sizes: tuple[int, ...], fill: float = 0.0, columns: int | None = None
    ) -> Any:
        """A per-row attribute as a dask array chunked as the training rows: from the blocks'
        futures (one value a row, or ``columns`` values), a numpy array on the client (one row
        per training row, any columns), or (None) the constant ``fill``."""
        import dask.array as da

        if values is None:
            whole = da.full(int(sum(sizes)), fill, chunks=(sizes,))
        elif isinstance(values, np.ndarray):
            chunks = (sizes,) + tuple((n,) for n in values.shape[1:])
            return da.from_array(values, chunks=chunks).rechunk((self._train_chunks,) + chunks[1:])
        else:
            tail = () if columns is None else (columns,)
            whole = da.concatenate(
                [
                    da.from_delayed(part, shape=(size, *tail), dtype=np.float64)
                    for part, size in zip(values, sizes, strict=True)
                ]
            )
        return whole.rechunk({0: self._train_chunks})

    # ------------------------------------------------------------------ prediction
    def decision_function(self, X) -> Any:
        """``H(x)``; a lazy dask array for dask input (numpy for in-memory input)."""
        check_is_fitted(self)
        if not _is_dask_collection(X):
            return super().decision_function(X)
        X, feature_names = _as_matrix(X, lengths=False)
        self._check_predict_features(X, feature_names)
        if self.alphas_.ndim == 2:  # K classes: F(x), one column per class
            predictors = [
                EnsemblePredictor(learners, alphas) for learners, alphas in self._class_ensembles()
            ]
            X = X.rechunk({1: -1})
            return X.map_blocks(
                _block_class_margins,
                predictors,
                chunks=(X.chunks[0], (len(predictors),)),
                dtype=np.float64,
                meta=np.empty((0, 0)),
            )
        predictor = EnsemblePredictor(self.estimators_, self.alphas_)
        return X.map_blocks(
            _block_margin, predictor, drop_axis=1, dtype=np.float64, meta=np.empty(0)
        )

    def predict(self, X) -> Any:
        """Predicted classes; a lazy dask array for dask input."""
        margin = self.decision_function(X)
        if not _is_dask_collection(margin):
            return self._classes_from_margin(margin)
        classes = self.classes_
        if margin.ndim == 2:
            return margin.map_blocks(
                lambda m: classes[np.argmax(m, axis=1)],
                drop_axis=1,
                dtype=classes.dtype,
                meta=classes[:0],
            )
        return margin.map_blocks(
            lambda m: classes[(m > 0).astype(int)], dtype=classes.dtype, meta=classes[:0]
        )

    def predict_proba(self, X) -> Any:
        """``[sigmoid(-H), sigmoid(H)]``, or ``softmax(F)`` for K classes (see
        :meth:`viboost.VIBoostClassifier.predict_proba`); a lazy dask array for dask input."""
        margin = self.decision_function(X)
        if not _is_dask_collection(margin):
            return self._proba_from_margin(margin)
        if margin.ndim == 2:
            return margin.map_blocks(lambda m: softmax(m, axis=1), dtype=np.float64)
        return margin.map_blocks(
            lambda m: np.column_stack([expit(-m), expit(m)]),
            new_axis=1,
            chunks=(margin.chunks[0], (2,)),
            dtype=np.float64,
        )

    def predict_log_proba(self, X) -> Any:
        """Logarithm of :meth:`predict_proba`; a lazy dask array for dask input."""
        margin = self.decision_function(X)
        if not _is_dask_collection(margin):
            if margin.ndim == 2:
                return log_softmax(margin, axis=1)
            return np.column_stack([log_expit(-margin), log_expit(margin)])
        if margin.ndim == 2:
            return margin.map_blocks(lambda m: log_softmax(m, axis=1), dtype=np.float64)
        return margin.map_blocks(
            lambda m: np.column_stack([log_expit(-m), log_expit(m)]),
            new_axis=1,
            chunks=(margin.chunks[0], (2,)),
            dtype=np.float64,
        )

    def _check_predict_features(self, X: Any, feature_names: np.ndarray | None) -> None:
        if X.shape[1] != self.n_features_in_:
            raise ValueError(
                f"X has {X.shape[1]} features, but {type(self).__name__} is expecting "
                f"{self.n_features_in_} features as input."
            )
        fitted = getattr(self, "feature_names_in_", None)
        if fitted is not None and feature_names is not None:
            if not np.array_equal(fitted, feature_names):
                raise ValueError(
                    "The feature names should match those that were passed during fit: got "
                    f"{list(feature_names)}, fitted with {list(fitted)}."
                )

    def to_local(self) -> VIBoostClassifier:
        """An in-memory :class:`viboost.VIBoostClassifier` with this fitted model (the
        per-row attributes computed to numpy)."""
        check_is_fitted(self)
        params = {
            name: value
            for name, value in self.get_params(deep=False).items()
            if name not in _DASK_PARAMETERS
        }
        model = VIBoostClassifier(**params)
        state = self.__getstate__()
        for name in (*_DASK_PARAMETERS, "_train_chunks", "_n_rows"):
            state.pop(name, None)
        model.__dict__.update(state)
        model.__dict__.pop("_viboost_version", None)
        return model


def _item(pair: tuple, index: int) -> Any:
    return pair[index]


def _label_posteriors(
    block: blocks.TrainingBlock, noise: tuple, noise_model: bool
) -> tuple[np.ndarray, tuple[np.ndarray, float]]:
    """Two classes, in-sample: the block's ``true_class_proba_`` rows (from its rows'
    probabilities of a wrong label, ``noise`` from :func:`~viboost.dask.blocks.in_sample_noise`;
    zeros without the noise model, as ``mislabel_proba_``), and the joint of its given and true
    labels with its weight, by the in-memory estimator's formulas."""
    y_index = (block.y > 0).astype(np.intp)
    wrong = noise[1] if noise_model else np.zeros(block.n_rows)
    proba = VIBoostClassifier._binary_true_class_proba(wrong, y_index)
    weight = block.sample_weight
    return proba, (joint_of(proba, y_index, weight), float(weight.sum()))


def _block_margin(X: np.ndarray, predictor: EnsemblePredictor) -> np.ndarray:
    return predictor.decision_function(np.asarray(X, dtype=np.float64))


def _block_class_margins(X: np.ndarray, predictors: list[EnsemblePredictor]) -> np.ndarray:
    """K classes: the margins ``F`` of a block of rows, one column per class."""
    X = np.asarray(X, dtype=np.float64)
    return np.column_stack([predictor.decision_function(X) for predictor in predictors])


def _class_counts(classes: np.ndarray, summaries: list[blocks.BlockSummary]) -> np.ndarray:
    """The rows of positive weight of each class, summed over the blocks' summaries."""
    counts = np.zeros(classes.size, dtype=np.int64)
    for summary in summaries:
        if summary.active_labels.size:
            index = np.searchsorted(classes, summary.active_labels)
            np.add.at(counts, index, summary.active_counts)
    return counts


def _block_rows(
    tasks: BlockTasks,
    training: list,
    binner: FeatureBinner,
    sizes: tuple[int, ...],
    tree: TreeSettings | None,
    n_classes: int = 2,
) -> MakeRows:
    """The row sources of a cross-fitted fit on the blocks: the ensembles' multiplicities and
    held-out rows are cut into the blocks and scattered to the workers (for K > 2 classes, one
    row of each per group, whose K ensembles share them)."""
    bounds = np.concatenate([[0], np.cumsum(sizes)])
    pieces = [slice(bounds[b], bounds[b + 1]) for b in range(len(sizes))]

    def make_rows(multiplicities: np.ndarray, validation: np.ndarray | None) -> BlockRows:
        held_out = None
        if validation is not None:
            held_out = [tasks.scatter(validation[:, p]) for p in pieces]
        n_active = [int(np.count_nonzero(m > 0)) for m in multiplicities]
        if n_classes > 2:
            n_active = [n for n in n_active for _ in range(n_classes)]
        return BlockRows(
            tasks,
            training,
            binner,
            n_active,
            [tasks.scatter(multiplicities[:, p]) for p in pieces],
            held_out,
            tree,
            n_classes,
        )

    return make_rows


def _is_dask_collection(obj: Any) -> bool:
    from dask.base import is_dask_collection

    return is_dask_collection(obj)


def _as_matrix(X: Any, lengths: bool = True) -> tuple[Any, np.ndarray | None]:
    """X as a 2-D float64 dask array (known row chunks if ``lengths``) and its column names
    (None unless a dataframe with string names). Non-numeric dataframe columns are refused
    before any work is scheduled."""
    import dask.array as da
    import dask.dataframe as dd
    import pandas as pd

    names = None
    if isinstance(X, pd.DataFrame):
        X = dd.from_pandas(X, npartitions=1)
    if isinstance(X, dd.DataFrame):
        reject_non_numeric_columns(X, "DaskVIBoostClassifier")
        columns = np.asarray(X.columns, dtype=object)
        if columns.size and all(isinstance(c, str) for c in columns):
            names = columns
        # optimize() first: dask may merge partitions of a narrow selection, and the lengths
        # must be counted on the partitions that to_dask_array will cut.
        X = X.optimize().to_dask_array(lengths=True if lengths else None)
    elif isinstance(X, dd.Series):
        raise ValueError("X must be 2-D (a dask array or dataframe), got a dask Series.")
    elif not isinstance(X, da.Array):
        X = da.from_array(np.asarray(X))
    if X.ndim != 2:
        raise ValueError(f"X must be 2-D, got a dask array of shape {X.shape}.")
    if X.dtype.kind not in "biuf":
        raise ValueError(f"X must be numeric, got dtype {X.dtype}.")
    return X.astype(np.float64), names


def _as_vector(v: Any, name: str, X: Any) -> Any:
    """A 1-D dask array with the row chunks of ``X``."""
    import dask.array as da
    import dask.dataframe as dd

    if isinstance(v, dd.DataFrame):
        if len(v.columns) != 1:
            raise ValueError(f"{name} must be 1-D; got a dataframe of {len(v.columns)} columns.")
        v = v[v.columns[0]]
    if isinstance(v, dd.Series):
        v = v.optimize().to_dask_array(lengths=True)
    elif not isinstance(v, da.Array):
        v = da.from_array(np.asarray(v))
    if v.ndim == 2 and v.shape[1] == 1:
        v = v[:, 0]
    if v.ndim != 1:
        raise ValueError(f"{name} must be 1-D, got shape {v.shape}.")
    if v.shape[0] != X.shape[0]:
        raise ValueError(
            f"{name} has {v.shape[0]} rows but X has {X.shape[0]}: they must hold the same rows."
        )
    return v.rechunk((X.chunks[0],))


def _ones_like_rows(X: Any) -> Any:
    import dask.array as da

    return da.ones(X.shape[0], chunks=(X.chunks[0],), dtype=np.float64)
