"""VIBoost on a Dask cluster: :class:`DaskVIBoostClassifier`.

The estimator takes dask arrays or dask dataframes and fits, on the workers of a
``distributed.Client``, the same model as :class:`viboost.VIBoostClassifier` on the same data
(both presets): it hands the fit driver (:class:`~viboost.fitting.driver.FitDriver`) the
blocks as its training data (:class:`~viboost.dask.data.BlockData`) and stores the same
result. ``fit``:

1. **checks** the input before any work is scheduled (non-numeric dataframe columns that are
   not categorical features, ``category`` columns of unknown categories), finds the
   categories of the categorical features (:func:`~viboost.dask.data.fit_encoder`) and
   encodes them as codes partition by partition, then in one pass over the blocks
   (:mod:`viboost.dask.blocks`): sizes, labels, infinite values, missing labels and bad
   sample weights;
2. **bins** the features once: edges from a uniform sample of at most 200,000 weighted rows
   drawn exactly as the in-memory binner draws it (the sketch; plus, for features with few
   distinct values, a pass that checks the sample saw them all), then every block is binned
   on its worker and kept there (``uint8``), with its labels and weights;
3. **boosts**: the same :class:`~viboost.boosting.booster.Booster` as in memory, over the
   blocks (:class:`~viboost.dask.engine.BlockRows`, which moves only histograms, knot moments
   and scalars to the client; trees are grown on the client from the blocks' node
   histograms); with the robust preset, the same cross-fit
   (:class:`~viboost.fitting.cross_fit.CrossFitter`): one ensemble per fold in lockstep, the
   out-of-fold margins gathered every 10 rounds to calibrate the noise model and choose the
   number of rounds, then the final booster. K > 2 classes are fitted as in memory: one
   ensemble per class per fold (the blocks hold class indices and couple each fold's classes
   through the softmax), the K-class noise model calibrated on the out-of-fold margins ``F``.

Predictions are lazy: ``decision_function``, ``predict`` and ``predict_proba`` map the fitted
ensembles (stumps or trees) and the task's link (:mod:`viboost.fitting.task`) over the blocks
of a dask collection.
"""

from __future__ import annotations

import copy
import warnings
from collections.abc import Callable
from numbers import Integral, Real
from typing import Any

import numpy as np
from sklearn.base import clone
from sklearn.utils._param_validation import Interval, StrOptions
from sklearn.utils.validation import check_is_fitted

from viboost.boosting.predictor import EnsemblePredictor
from viboost.dask.actors import ActorService
from viboost.dask.data import (
    BlockData,
    as_matrix,
    bin_blocks,
    is_dask_collection,
    read_input,
)
from viboost.dask.engine import BlockTasks
from viboost.dask.service import BlockService, ServiceLost
from viboost.estimator import VIBoostClassifier
from viboost.fitting import FitDriver, Task, make_task
from viboost.fitting.driver import PER_ROW

__all__ = ["DaskVIBoostClassifier"]

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

    The parameters are :class:`viboost.VIBoostClassifier`'s and the four below (``client``,
    ``block_size``, ``timeout``, ``transport``); ``categorical_features`` is repeated here for
    what it asks of dask input.

    Parameters
    ----------
    categorical_features : "from_dtype", array-like of bool, int or str, or None, \
            default="from_dtype"
        Which features are categorical, as in :class:`viboost.VIBoostClassifier` (the same
        values, the same model): ``"from_dtype"``, the dask dataframe's ``category``,
        ``object`` and ``string`` columns; a boolean mask, indices or column names (numeric
        columns listed take non-negative integer codes, negative ones missing, as in memory);
        None for none. ``fit`` finds the categories on the cluster: a ``category`` column needs
        categories known to dask (``X[c].cat.known``; else ``X = X.categorize(columns=[...])``
        first, or an error names the column); a text or numeric column's distinct values are
        first estimated (``nunique_approx``), so that a column with far more than
        ``max_bins`` of them (an id, an e-mail) is refused, by name, before its values are
        collected, then counted exactly. Predictions encode each partition by value: the
        category lists and their order may differ from ``fit``'s, and categories not seen in
        ``fit`` go to the missing side of every split, without error. Non-numeric columns that
        are not categorical features are refused before any work is scheduled.
    client : distributed.Client or None, default=None
        The cluster to fit on; None uses the current client (``distributed.get_client()``).
    block_size : int or None, default=None
        Rows per block; None: 8 MiB of binned features, between 4,096 and 1,048,576 rows.
    timeout : float, default=600
        Seconds to wait for one distributed step (one pass over the blocks) before the fit
        stops with an error; a fit never waits without bound on a lost cluster.
    transport : {"auto", "direct", "actors", "scheduler"}, default="auto"
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
        ``"scheduler"``. ``"actors"``: the blocks held by Dask Actors, one per worker thread,
        called directly over Dask's own connections (:mod:`viboost.dask.actors`): no port of
        its own and TLS as the cluster has it, at about 1.3 times the direct services' time
        (``docs/dask.md``). The fit is bit for bit the same either way; if a direct
        connection or an actor fails (a worker lost mid-fit, a firewall), the fit warns and
        runs again through the scheduler.

    Attributes
    ----------
    transport_ : {"direct", "actors", "scheduler"}
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
    - ``is_categorical_``, ``categories_`` and the encoder are the in-memory estimator's:
      :meth:`to_local` gives a model that predicts pandas frames as this one predicts dask
      frames.
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
        "transport": [StrOptions({"auto", "direct", "actors", "scheduler"})],
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
        max_bins: int = 255,
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
            categorical_features=categorical_features,
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
        for name in PER_ROW:
            if name in state and is_dask_collection(state[name]):
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
        config = self._fit_config()
        client = self._get_client()
        tasks = BlockTasks(client, self.timeout)
        name = type(self).__name__
        max_bins = self.max_bins
        assert max_bins is not None, "_parameter_constraints: max_bins is an int here"
        raw = read_input(
            client, tasks, X, y, sample_weight, self.block_size, name,
            categorical_features=self.categorical_features, max_bins=max_bins,
        )  # fmt: skip
        task = make_task(raw.classes.size)
        # The checks of the in-memory fit, before any work.
        plan = config.plan(task, raw.classes, raw.class_counts(), raw.total_weight)
        training, binner = bin_blocks(tasks, raw, task, max_bins, self.random_state)
        del raw.raw, raw.blocked  # (binned: the raw blocks are released)
        tree = plan.tree_settings()

        def data(tasks: Any, training: list, labels: Any = None) -> BlockData:
            return BlockData(task, tasks, training, binner, raw.sizes, raw.train_chunks,
                             raw.n_active, tree, labels)  # fmt: skip

        driver = FitDriver(task, config, plan)
        outer = data(tasks, training)
        plan, folds = driver.folds(outer)
        n_ensembles = task.n_ensembles * (1 if folds is None else len(folds))
        # The training blocks are released when this call returns (nothing else holds them).
        fitted = self._on_blocks(
            tasks,
            training,
            raw.sizes,
            raw.n_features,
            n_ensembles,
            lambda tasks, training: driver.fit(data(tasks, training, outer._labels), plan, folds),
        )
        self.n_features_in_ = raw.n_features
        if raw.feature_names is not None:
            self.feature_names_in_ = raw.feature_names
        elif hasattr(self, "feature_names_in_"):
            del self.feature_names_in_
        self.classes_ = raw.classes
        self._store_encoder(raw.encoder)
        self._train_chunks = raw.train_chunks
        self._n_rows = int(sum(raw.sizes))
        fitted.store(self)
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
        service_class: Any = None
        if self.transport == "actors" and tasks.homes is not None:
            service_class, name = ActorService, "actors"
        elif self._direct_transport(tasks, sizes, n_features, n_ensembles):
            service_class, name = BlockService, "direct"
        if service_class is not None:
            try:
                with service_class(tasks, training) as service:
                    out = body(service, service.training)
                self.transport_ = name
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
        if self.transport in ("scheduler", "actors") or tasks.homes is None:
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

    # ------------------------------------------------------------------ prediction
    def _on_rows(self, X: Any, link: Callable, columns: int | None, dtype: Any) -> Any:
        """``link`` of the fitted margins of the rows of dask ``X``, block by block: a lazy
        dask array of one value a row (``columns`` None) or ``columns`` values a row."""
        # Categorical columns encoded by value, partition by partition (unseen: missing).
        encoder = getattr(self, "_encoder", None)
        X, feature_names = as_matrix(X, lengths=False, encoder=encoder, name=type(self).__name__)
        self._check_predict_features(X, feature_names)
        task = self._task
        predictors = [
            EnsemblePredictor(learners, alphas)
            for learners, alphas in task.ensembles(self.estimators_, self.alphas_)
        ]
        X = X.rechunk({1: -1})
        if columns is None:
            return X.map_blocks(
                _block_link, predictors, link, drop_axis=1, dtype=dtype,
                meta=np.empty(0, dtype=dtype),
            )  # fmt: skip
        return X.map_blocks(
            _block_link, predictors, link, chunks=(X.chunks[0], (columns,)), dtype=dtype,
            meta=np.empty((0, 0), dtype=dtype),
        )  # fmt: skip

    def decision_function(self, X) -> Any:
        """``H(x)`` (``F(x)`` for K classes); a lazy dask array for dask input (numpy for
        in-memory input)."""
        check_is_fitted(self)
        if not is_dask_collection(X):
            return super().decision_function(X)
        task = self._task
        columns = None if task.n_ensembles == 1 else task.n_ensembles
        return self._on_rows(X, task.decision, columns, np.float64)

    def predict(self, X) -> Any:
        """Predicted classes; a lazy dask array for dask input."""
        check_is_fitted(self)
        if not is_dask_collection(X):
            return super().predict(X)
        link = _ClassOf(self._task, self.classes_)
        return self._on_rows(X, link, None, self.classes_.dtype)

    def predict_proba(self, X) -> Any:
        """The probabilities of the true class (see
        :meth:`viboost.VIBoostClassifier.predict_proba`); a lazy dask array for dask input."""
        check_is_fitted(self)
        if not is_dask_collection(X):
            return super().predict_proba(X)
        return self._on_rows(X, self._task.proba, self.classes_.size, np.float64)

    def predict_log_proba(self, X) -> Any:
        """Logarithm of :meth:`predict_proba`; a lazy dask array for dask input."""
        check_is_fitted(self)
        if not is_dask_collection(X):
            return super().predict_log_proba(X)
        return self._on_rows(X, self._task.log_proba, self.classes_.size, np.float64)

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
        # Its own encoder: the local model encodes pandas frames as this one encodes dask ones.
        model._store_encoder(copy.deepcopy(self._encoder))
        return model


class _ClassOf:
    """The predicted class of each row from its margins (the task's link, picklable)."""

    def __init__(self, task: Task, classes: np.ndarray) -> None:
        self.task, self.classes = task, classes

    def __call__(self, margin: np.ndarray) -> np.ndarray:
        return self.classes[self.task.predict_index(margin)]


def _block_link(X: np.ndarray, predictors: list[EnsemblePredictor], link: Callable) -> Any:
    """``link`` of the margins of a block of rows (one column per ensemble)."""
    X = np.asarray(X, dtype=np.float64)
    return link(np.column_stack([predictor.decision_function(X) for predictor in predictors]))
