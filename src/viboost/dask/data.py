"""The training rows of a distributed fit: the input reader and :class:`BlockData`.

:func:`read_input` takes dask (or numpy / pandas) input, refuses what the in-memory estimator
refuses before any work is scheduled, finds the categories of the categorical features
(:func:`categorical_input`, :func:`fit_encoder`) and encodes them as codes, partition by
partition (:func:`as_matrix`), cuts the rows into blocks that depend only on the shape
of the data and summarises them in one pass (sizes, labels, infinite values, missing labels,
bad weights); :func:`bin_blocks` draws the bin edges from the same sample of weighted rows as
the in-memory binner and keeps every block binned on its worker. :class:`BlockData` is the fit
driver's :class:`~viboost.fitting.data.TrainingData` over those blocks: the same calls as
:class:`~viboost.fitting.data.InMemoryData`, answered on the workers, its per-row results dask
arrays chunked as the training rows.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
from sklearn.utils.multiclass import check_classification_targets

from viboost._utils.categorical import (
    MAX_CATEGORIES,
    NON_NUMERIC_HINT,
    CategoricalEncoder,
    categorical_reason,
    check_category_count,
    column_categories,
    resolve_categorical,
)
from viboost._utils.validation import check_classes, reject_non_numeric_columns
from viboost.boosting.binning import FeatureBinner, subsample_ranks
from viboost.boosting.split_statistics import TreeSettings
from viboost.dask import blocks
from viboost.dask.engine import BlockRows, BlockTasks
from viboost.fitting.data import InSampleStatistics
from viboost.fitting.task import Task
from viboost.noise_fit.calibration import flip_rates_from_sums, joint_of, true_class_from_mislabel
from viboost.variational import ModelPriors, VariationalState
from viboost.variational.state import CleanLogOdds

__all__ = [
    "BlockData",
    "CategoricalInput",
    "RawInput",
    "as_matrix",
    "bin_blocks",
    "categorical_input",
    "fit_encoder",
    "read_input",
]

#: ``fit`` refuses a categorical column without a ``category`` dtype, before collecting its
#: distinct values, when the estimate of their count (``nunique_approx``, HyperLogLog: within a
#: few percent) exceeds ``max_bins`` by this factor; the exact count is checked after.
APPROXIMATE_EXCESS = 2.0


@dataclass
class RawInput:
    """The input cut into blocks (computed once, released once binned) and what one pass
    over them found."""

    raw: tuple[list, list, list]
    blocked: list
    sizes: tuple[int, ...]
    n_features: int
    feature_names: np.ndarray | None
    train_chunks: tuple[int, ...]
    summaries: list[blocks.BlockSummary]
    classes: np.ndarray
    #: The encoder of the features (categorical ones as codes), fitted to the input.
    encoder: CategoricalEncoder

    @property
    def total_weight(self) -> float:
        return float(sum(summary.total_weight for summary in self.summaries))

    @property
    def n_active(self) -> int:
        """The rows of positive weight."""
        return int(sum(summary.n_active for summary in self.summaries))

    def class_counts(self) -> np.ndarray:
        """The rows of positive weight of each class, summed over the blocks' summaries."""
        counts = np.zeros(self.classes.size, dtype=np.int64)
        for summary in self.summaries:
            if summary.active_labels.size:
                assert summary.active_counts is not None, "summarize_block counts the labels"
                index = np.searchsorted(self.classes, summary.active_labels)
                np.add.at(counts, index, summary.active_counts)
        return counts


@dataclass
class CategoricalInput:
    """``X`` as :func:`fit_encoder` reads it: a dask dataframe wherever a feature is
    categorical (numpy, pandas and dask arrays converted), which features are categorical, and
    how the errors name them and say why they are categorical."""

    X: Any
    is_categorical: np.ndarray
    labels: list[str]
    reasons: list[str]

    @property
    def n_features(self) -> int:
        return int(self.is_categorical.size)


def categorical_input(X: Any, categorical_features: Any, name: str) -> CategoricalInput:
    """Which features of ``X`` are categorical (``categorical_features`` as in memory:
    :func:`~viboost._utils.categorical.resolve_categorical`), checked without scheduling any
    work: non-numeric dataframe columns that are not categorical features, and ``category``
    columns whose categories dask does not know, are refused, naming them.

    ``X`` comes back as a dask dataframe when a feature is categorical (a pandas frame in one
    partition, numpy or dask arrays with columns ``0 .. n_features-1``), else as given.
    """
    import dask.array as da
    import dask.dataframe as dd
    import pandas as pd

    if isinstance(X, pd.DataFrame):
        X = dd.from_pandas(X, npartitions=1)
    frame = isinstance(X, dd.DataFrame)
    names: list[str] | None = None
    if frame and len(X.columns) and all(isinstance(c, str) for c in X.columns):
        names = [str(c) for c in X.columns]
    mask = resolve_categorical(X, categorical_features, names)
    if frame:
        # Non-numeric columns that are not categorical, before anything is scheduled.
        reject_non_numeric_columns(
            X[[X.columns[j] for j in np.flatnonzero(~mask)]], name, NON_NUMERIC_HINT
        )
    if not mask.any():
        return CategoricalInput(X, mask, [], [])
    if not frame:
        array = X if isinstance(X, da.Array) else np.asarray(X)
        if array.ndim != 2 or array.dtype.kind not in "biuf":
            if isinstance(X, da.Array):
                raise ValueError(
                    f"X must be a numeric dask array or a dask dataframe, got a dask array of "
                    f"dtype {array.dtype} and shape {array.shape}: pass the text columns as a "
                    "dask dataframe."
                )
            # numpy input, e.g. an object array of numbers and strings: one pandas partition.
            X = dd.from_pandas(pd.DataFrame(array).infer_objects(), npartitions=1)
        else:
            X = dd.from_dask_array(da.asarray(array))
    # How the errors name a column: by name in a dataframe, by position in an array.
    labels = [
        f"column {str(column)!r}" if frame else f"column {j}" for j, column in enumerate(X.columns)
    ]
    from_dtype = isinstance(categorical_features, str)
    reasons = [categorical_reason(dtype, from_dtype) for dtype in X.dtypes]
    unknown = [
        str(X.columns[j])
        for j in np.flatnonzero(mask)
        if isinstance(X.dtypes.iloc[j], pd.CategoricalDtype) and not X[X.columns[j]].cat.known
    ]
    if unknown:
        raise ValueError(
            f"X has category column(s) {unknown} whose categories dask does not know (they "
            "may differ between partitions), so they cannot be encoded alike in every "
            f"partition; call X = X.categorize(columns={unknown}) first, or pass them as "
            "string columns."
        )
    return CategoricalInput(X, mask, labels, reasons)


def fit_encoder(columns: CategoricalInput, max_bins: int | None) -> CategoricalEncoder:
    """The encoder of ``columns.X`` (:class:`~viboost._utils.categorical.CategoricalEncoder`,
    :meth:`~viboost._utils.categorical.CategoricalEncoder.from_categories`): the categories of
    each categorical feature as :meth:`~viboost._utils.categorical.CategoricalEncoder.fit`
    finds them in memory, found on the cluster (the current client), in two passes at most:

    1. the ``category`` columns' codes that occur (their categories, in the dtype's order);
       and an estimate of the number of distinct values of the other categorical columns
       (``nunique_approx``), which refuses a column with far more than ``max_bins`` of them
       (:data:`APPROXIMATE_EXCESS`) before its values are collected;
    2. the distinct values of those other columns, whose count is then checked exactly.
    """
    import dask
    import pandas as pd

    X, mask = columns.X, columns.is_categorical
    if not mask.any():
        return CategoricalEncoder.numeric(columns.n_features)
    limit = MAX_CATEGORIES if max_bins is None else min(int(max_bins), MAX_CATEGORIES)
    known: list[int] = []
    other: list[int] = []
    for j in map(int, np.flatnonzero(mask)):
        is_category = isinstance(X.dtypes.iloc[j], pd.CategoricalDtype)
        (known if is_category else other).append(j)
    series = [X[X.columns[j]] for j in range(columns.n_features)]
    codes, estimates = dask.compute(
        [series[j].cat.codes.drop_duplicates(split_out=1) for j in known],
        [series[j].nunique_approx() for j in other],
    )
    for j, estimate in zip(other, estimates, strict=True):
        if float(estimate) > APPROXIMATE_EXCESS * limit:
            check_category_count(
                columns.labels[j], round(float(estimate)), limit, columns.reasons[j],
                approximate=True,
            )  # fmt: skip
    # (split_out=1: a tree reduction on the workers, no shuffle)
    wanted = [series[j].dropna().drop_duplicates(split_out=1) for j in other]
    (distinct,) = dask.compute(wanted) if other else ([],)
    categories: list[np.ndarray | None] = [None] * columns.n_features
    for j, present in zip(known, codes, strict=True):
        present = np.unique(np.asarray(present, dtype=np.int64))
        categories[j] = column_categories(
            series[j].cat.categories[present[present >= 0]], columns.labels[j], limit,
            columns.reasons[j], in_order=True,
        )  # fmt: skip
    for j, values in zip(other, distinct, strict=True):
        categories[j] = column_categories(
            np.asarray(values, dtype=object), columns.labels[j], limit, columns.reasons[j]
        )
    return CategoricalEncoder.from_categories(categories)


def read_input(
    client: Any, tasks: BlockTasks, X: Any, y: Any, sample_weight: Any, block_size: int | None,
    name: str, categorical_features: Any = None, max_bins: int | None = 255,
) -> RawInput:  # fmt: skip
    """Read ``X``, ``y`` and ``sample_weight`` into blocks and check them (see the module
    docstring), the categorical features (``categorical_features``, at most ``max_bins``
    categories each) encoded as codes; nothing is binned yet."""
    # Non-numeric columns not declared categorical, and category columns of unknown
    # categories, are refused before anything is scheduled.
    columns = categorical_input(X, categorical_features, name)
    with client.as_current():  # partition lengths are counted on this fit's cluster
        encoder = fit_encoder(columns, max_bins)
        X, feature_names = as_matrix(columns.X, encoder=encoder, name=name)
        y = as_vector(y, "y", X)
        sample_weight = (
            ones_like_rows(X)
            if sample_weight is None
            else as_vector(sample_weight, "sample_weight", X)
        )
    n_rows, n_features = X.shape
    if n_features == 0:
        raise ValueError(f"X has 0 features; {name} needs at least one.")
    sizes = blocks.block_sizes(n_rows, n_features, block_size)
    # The raw blocks are computed once (the input read, cut into blocks) for the three
    # passes before the rounds (checks, the binner's sample, binning), and released once
    # binned: each pass would otherwise read the input and cut it again.
    blocked = client.persist(
        [X.rechunk((sizes, n_features)), y.rechunk((sizes,)), sample_weight.rechunk((sizes,))]
    )
    raw = tuple(part.to_delayed().ravel().tolist() for part in blocked)
    summaries = tasks.gather(tasks.compute(blocks.summarize_block, *raw))
    classes = _check_summaries(summaries, name)
    return RawInput(raw, blocked, sizes, n_features, feature_names, X.chunks[0], summaries,
                    classes, encoder)  # fmt: skip


def _check_summaries(summaries: list[blocks.BlockSummary], name: str) -> np.ndarray:
    """The classes, after the checks of the in-memory ``fit`` on the summaries."""
    if any(s.infinite_features for s in summaries):
        raise ValueError("Input X contains infinity or a value too large for dtype('float64').")
    if any(s.missing_labels for s in summaries):
        raise ValueError("Input y contains NaN (or None): every row needs a label.")
    if any(s.bad_weights for s in summaries):
        raise ValueError(
            "sample_weight must be finite and nonnegative; it has negative, NaN or infinite values."
        )
    if sum(s.n_rows for s in summaries) == 0:
        raise ValueError("Found array with 0 sample(s) while a minimum of 1 is required.")
    classes = np.unique(np.concatenate([s.labels for s in summaries]))
    check_classification_targets(classes)
    check_classes(classes, name)
    return classes


def bin_blocks(
    tasks: BlockTasks, raw: RawInput, task: Task, max_bins: int, random_state: Any
) -> tuple[list, FeatureBinner]:
    """The bin edges, from the same sample of weighted rows as the in-memory binner, and the
    training blocks, binned on the workers with the task's labels, placed evenly over the
    workers' threads."""
    # Categorical features are binned as in memory: bin == code (edges from the encoder alone).
    categorical = raw.encoder.n_categories_ if raw.encoder.any_categorical else None
    binner = FeatureBinner(max_bins=max_bins, random_state=random_state, n_categories=categorical)
    counts = np.array([s.n_active for s in raw.summaries])
    starts = np.concatenate([[0], np.cumsum(counts)])
    ranks = subsample_ranks(int(starts[-1]), binner.subsample, binner.random_state)
    if ranks is None:
        local = [np.arange(c) for c in counts]
    else:
        cuts = np.searchsorted(ranks, starts)
        local = [ranks[cuts[b] : cuts[b + 1]] - starts[b] for b in range(counts.size)]
    X_parts, _, s_parts = raw.raw
    sample = np.concatenate(
        tasks.gather(tasks.compute(blocks.sample_block, X_parts, s_parts, local))
    )

    def find_absent(features: np.ndarray, table: np.ndarray) -> np.ndarray:
        flags = tasks.gather(
            tasks.compute(blocks.absent_in_block, X_parts, s_parts, features=features, table=table)
        )
        return np.any(flags, axis=0)

    def distinct_values(feature: int) -> np.ndarray:
        parts = tasks.gather(
            tasks.compute(blocks.distinct_in_block, X_parts, s_parts, feature=feature)
        )
        return np.unique(np.concatenate(parts))

    binner = binner.fit_sample(sample, ranks is not None, find_absent, distinct_values)
    training = tasks.compute(
        blocks.build_block, *raw.raw, binner=binner, classes=raw.classes, task=task
    )
    # Balanced over the workers' threads, which then run one task each per pass.
    return tasks.place(training, raw.sizes), binner


class BlockData:
    """The training blocks as the fit driver reads them (the
    :class:`~viboost.fitting.data.TrainingData` protocol), through ``tasks`` (the scheduler's
    :class:`~viboost.dask.engine.BlockTasks`, or the direct services that stand in for it)."""

    label = " (dask)"

    def __init__(
        self,
        task: Task,
        tasks: Any,
        training: list,
        binner: FeatureBinner,
        sizes: tuple[int, ...],
        train_chunks: tuple[int, ...],
        n_active: int,
        tree: TreeSettings | None,
        labels: tuple[np.ndarray, np.ndarray] | None = None,
    ) -> None:
        self.task = task
        self.tasks = tasks
        self.training = training
        self.binner = binner
        self.sizes = sizes
        self.train_chunks = train_chunks
        self.n_active = n_active
        self.tree = tree
        self._labels = labels

    @property
    def n_rows(self) -> int:
        return int(sum(self.sizes))

    def labels(self) -> tuple[np.ndarray, np.ndarray]:
        """The blocks' labels and weights, gathered to the client (once)."""
        if self._labels is None:
            pairs = self.tasks.run(blocks.labels_and_weights, self.training)
            self._labels = (
                np.concatenate([pair[0] for pair in pairs]),
                np.concatenate([pair[1] for pair in pairs]),
            )
        return self._labels

    def make_rows(self, multiplicities: np.ndarray, validation: np.ndarray | None) -> BlockRows:
        """The ensembles' multiplicities and held-out rows cut into the blocks and scattered
        to the workers (one row of each per group, whose ensembles share them)."""
        tasks = self.tasks
        bounds = np.concatenate([[0], np.cumsum(self.sizes)])
        pieces = [slice(bounds[b], bounds[b + 1]) for b in range(len(self.sizes))]
        held_out = None
        if validation is not None:
            held_out = [tasks.scatter(validation[:, p]) for p in pieces]
        n_active = [
            int(np.count_nonzero(m > 0))
            for m in multiplicities
            for _ in range(self.task.n_ensembles)
        ]
        return BlockRows(
            tasks,
            self.training,
            self.binner,
            n_active,
            [tasks.scatter(multiplicities[:, p]) for p in pieces],
            held_out,
            self.tree,
            self.task.n_classes,
        )

    def in_sample_rows(self, margins: list[np.ndarray] | None) -> BlockRows:
        if margins is not None:
            raise ValueError("DaskVIBoostClassifier does not support warm_start=True.")
        return BlockRows(self.tasks, self.training, self.binner, [self.n_active], tree=self.tree)

    def initial_state(
        self, init_clean_proba: float, init_eta: tuple[float, float], priors: ModelPriors
    ) -> VariationalState:
        """The state before the first round (``initial_state``), its omega summed over the
        blocks."""
        parts = self.tasks.run(
            blocks.noise_weight_by_class, self.training, noise_proba=1.0 - init_clean_proba
        )
        return VariationalState(
            eta=np.array(init_eta),
            omega=priors.noise_grade + np.sum(parts, axis=0),
            clean=CleanLogOdds.constant(init_clean_proba),
        )

    def in_sample_statistics(
        self, rows: Any, clean: CleanLogOdds, noise_model: bool
    ) -> InSampleStatistics:
        """Computed on the blocks: only the blocks' sums come to the client; the per-row parts
        stay on the workers (dask arrays)."""
        tasks, training = self.tasks, self.training
        parts = tasks.submit(blocks.in_sample_noise, training, rows.finish(), clean=clean)
        posteriors = tasks.submit(_label_posteriors, training, parts, noise_model=noise_model)
        sums = np.sum(tasks.run(_item, parts, index=2), 0)
        joints = tasks.run(_item, posteriors, index=1) if noise_model else None
        phi, mislabel, true_class = tasks.finish(
            tasks.submit(_item, parts, index=0),
            tasks.submit(_item, parts, index=1),
            tasks.submit(_item, posteriors, index=0),
        )
        joint = None
        if joints is not None:  # the joint of all rows: the blocks' joints, weighted by weight
            block_joints, block_weights = zip(*joints, strict=True)
            joint = np.average(np.array(block_joints), axis=0, weights=block_weights)
        return InSampleStatistics(
            clean_proba=self._futures(phi),
            mislabel_proba=self._futures(mislabel) if noise_model else self.per_row(None),
            true_class_proba=self._futures(true_class, columns=2),
            flip_rates=flip_rates_from_sums(sums) if noise_model else np.full(3, np.nan),
            joint=joint,
        )

    def per_row(self, values: np.ndarray | None, fill: float = 0.0) -> Any:
        """A per-row result as a dask array chunked as the training rows: from a numpy array
        on the client (one row per training row, any columns), or (None) the constant
        ``fill``."""
        import dask.array as da

        if values is None:
            whole = da.full(self.n_rows, fill, chunks=(self.sizes,))
            return whole.rechunk({0: self.train_chunks})
        chunks = (self.sizes,) + tuple((n,) for n in values.shape[1:])
        return da.from_array(values, chunks=chunks).rechunk((self.train_chunks,) + chunks[1:])

    def _futures(self, values: list, columns: int | None = None) -> Any:
        """A per-row result from the blocks' futures (one value a row, or ``columns``)."""
        import dask.array as da

        tail = () if columns is None else (columns,)
        whole = da.concatenate(
            [
                da.from_delayed(part, shape=(size, *tail), dtype=np.float64)
                for part, size in zip(values, self.sizes, strict=True)
            ]
        )
        return whole.rechunk({0: self.train_chunks})


def _item(pair: tuple, index: int) -> Any:
    return pair[index]


def _label_posteriors(
    block: blocks.TrainingBlock, noise: tuple, noise_model: bool
) -> tuple[np.ndarray, tuple[np.ndarray, float]]:
    """Two classes, in-sample: the block's ``true_class_proba_`` rows (from its rows'
    probabilities of a wrong label, ``noise`` from :func:`~viboost.dask.blocks.in_sample_noise`;
    zeros without the noise model, as ``mislabel_proba_``), and the joint of its given and true
    labels with its weight, by the in-memory formulas."""
    y_index = (block.y > 0).astype(np.intp)
    wrong = noise[1] if noise_model else np.zeros(block.n_rows)
    proba = true_class_from_mislabel(wrong, y_index)
    weight = block.sample_weight
    return proba, (joint_of(proba, y_index, weight), float(weight.sum()))


def is_dask_collection(obj: Any) -> bool:
    """Whether ``obj`` is a dask collection (array, dataframe, series)."""
    from dask.base import is_dask_collection as is_collection

    return bool(is_collection(obj))


def as_matrix(
    X: Any,
    lengths: bool = True,
    encoder: CategoricalEncoder | None = None,
    name: str = "DaskVIBoostClassifier",
) -> tuple[Any, np.ndarray | None]:
    """X as a 2-D float64 dask array (known row chunks if ``lengths``) and its column names
    (None unless a dataframe with string names). With an ``encoder`` of categorical features,
    its categorical columns become their codes, partition by partition and by value (missing
    values and categories it has not seen: NaN, the missing side of every split). Non-numeric
    dataframe columns that are not categorical features are refused before any work is
    scheduled."""
    import dask.array as da
    import dask.dataframe as dd
    import pandas as pd

    # (an encoder of numeric features only: the numeric path)
    categorical = encoder if encoder is not None and encoder.any_categorical else None
    names = None
    if isinstance(X, pd.DataFrame):
        X = dd.from_pandas(X, npartitions=1)
    if isinstance(X, dd.DataFrame):
        columns = np.asarray(X.columns, dtype=object)
        if columns.size and all(isinstance(c, str) for c in columns):
            names = columns
        if categorical is None:
            reject_non_numeric_columns(X, name, NON_NUMERIC_HINT)
        else:
            if len(columns) != categorical.n_features_in_:
                raise ValueError(
                    f"X has {len(columns)} features, but {name} is expecting "
                    f"{categorical.n_features_in_} features as input."
                )
            numeric = [X.columns[j] for j in np.flatnonzero(~categorical.is_categorical_)]
            reject_non_numeric_columns(X[numeric], name, NON_NUMERIC_HINT)
            meta = pd.DataFrame(np.empty((0, columns.size)), columns=X.columns)
            X = X.map_partitions(_encode_partition, categorical, meta=meta)
        # optimize() first: dask may merge partitions of a narrow selection, and the lengths
        # must be counted on the partitions that to_dask_array will cut.
        X = X.optimize().to_dask_array(lengths=True if lengths else None)
    elif isinstance(X, dd.Series):
        raise ValueError("X must be 2-D (a dask array or dataframe), got a dask Series.")
    else:
        if not isinstance(X, da.Array):
            X = da.from_array(np.asarray(X))
        if categorical is not None and X.ndim == 2 and X.shape[1] == categorical.n_features_in_:
            # numeric codes declared categorical: each block encoded by value
            X = X.rechunk({1: -1}).map_blocks(_encode_block, categorical, dtype=np.float64)
    if X.ndim != 2:
        raise ValueError(f"X must be 2-D, got a dask array of shape {X.shape}.")
    if X.dtype.kind not in "biuf":
        raise ValueError(f"X must be numeric, got dtype {X.dtype}.")
    return X.astype(np.float64), names


def _encode_partition(frame: Any, encoder: CategoricalEncoder) -> Any:
    """One partition of a dataframe with its categorical columns as codes (a float frame)."""
    import pandas as pd

    values = np.empty((0, frame.shape[1])) if len(frame) == 0 else encoder.transform(frame)
    return pd.DataFrame(values, index=frame.index, columns=frame.columns)


def _encode_block(block: np.ndarray, encoder: CategoricalEncoder) -> np.ndarray:
    """One block of a dask array with its categorical columns as codes."""
    if block.shape[0] == 0:
        return np.empty(block.shape, dtype=np.float64)
    return encoder.transform(block)


def as_vector(v: Any, name: str, X: Any) -> Any:
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


def ones_like_rows(X: Any) -> Any:
    """Unit sample weights with the row chunks of ``X``."""
    import dask.array as da

    return da.ones(X.shape[0], chunks=(X.chunks[0],), dtype=np.float64)
