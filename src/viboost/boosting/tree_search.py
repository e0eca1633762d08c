"""The in-memory search for a round's histogram tree: binning once, then one growth per round.

:class:`TreeSearch` is a :class:`~viboost.boosting.learners.LearnerSearch`: the features are
binned once per fit (:class:`~viboost.boosting.binning.FeatureBinner`), and each round grows a
tree best-first (:class:`~viboost.boosting.growth.TreeGrowth`) over this process's rows
(:class:`~viboost.boosting.partition.RowPartition`) under the round's weights. See
:mod:`viboost.boosting.trees` for the model and the split scores.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from viboost._utils.scratch import ScratchArrays
from viboost.boosting.binning import FeatureBinner
from viboost.boosting.growth import TreeGrowths, padded_thresholds
from viboost.boosting.histogram import histogram_slots, sparse_bins, transpose_bins
from viboost.boosting.learners import BaseLearner
from viboost.boosting.partition import (
    RowPartition,
    grow_in_place,
    partition_leaf_index,
    root_histograms,
)
from viboost.boosting.split_statistics import TreeSettings
from viboost.boosting.splitting import CAT_L2, CAT_SMOOTH, MAX_CAT_THRESHOLD, MAX_CAT_TO_ONEHOT
from viboost.boosting.trees import HistogramTree, intercept_tree

__all__ = ["TreeSearch"]


class TreeSearch:
    """Grows one histogram tree per round over binned rows (best-first).

    Parameters
    ----------
    X : ndarray of shape (n_samples, n_features)
        Training features, finite or NaN.
    active : ndarray of bool, shape (n_samples,), default=None
        The rows the trees fit (positive multiplicity); others are routed but never counted.
    max_bins : int, default=255
        Most bins per feature.
    max_leaf_nodes : int, default=31
        Most leaves of a tree (at least 2).
    max_depth : int or None, default=None
        Most splits from the root to a leaf; None for no limit.
    min_samples_leaf : int, default=20
        Fewest of the search's rows in a leaf, counted with their ``sample_weight``.
    leaf_weights : {"per-leaf", "tied"}, default="per-leaf"
        See :class:`HistogramTree`.
    criterion : {"newton", "smoothed", "error"} or None, default=None
        The split score; None: ``"newton"`` for per-leaf weights, ``"error"`` for tied ones.
    weight_prior : float, default=1.0
        ``mu_0``, the prior multiplicity of every leaf weight.
    subsample : int, default=200_000
        Most rows drawn to place quantile edges.
    random_state : int, RandomState, Generator or None, default=None
        Source of that subsample.
    sample_weight : ndarray of shape (n_samples,), default=None
        How much each row counts towards ``min_samples_leaf`` (the fit's sample weights, so
        that a row of weight k counts as k copies of it); ones when None.
    n_categories : ndarray of int64, shape (n_features,), default=None
        Per feature, 0 (numeric) or its number of categories ``K`` (its values the codes
        ``0 .. K-1``, NaN missing): a categorical feature is split by sets of codes
        (:class:`~viboost.boosting.binning.FeatureBinner`, issue 53). None: all numeric.
    cat_smooth, min_data_per_group, max_cat_to_onehot, max_cat_threshold, cat_l2
        The categorical split search's regularisation
        (:class:`~viboost.boosting.split_statistics.TreeSettings`).

    Attributes
    ----------
    binner_ : FeatureBinner
    binned_ : ndarray of uint8, shape (n_samples, n_features)
    binned_columns_ : ndarray of uint8, shape (n_features, n_samples)
    sparse_bins_ : SparseBins
        The sparse features' bins (:func:`~viboost.boosting.histogram.sparse_bins`), read by
        the node histograms.
    """

    def __init__(
        self,
        X: np.ndarray,
        active: np.ndarray | None = None,
        max_bins: int = 255,
        max_leaf_nodes: int = 31,
        max_depth: int | None = None,
        min_samples_leaf: int = 20,
        leaf_weights: str = "per-leaf",
        criterion: str | None = None,
        weight_prior: float = 1.0,
        subsample: int = 200_000,
        random_state: int | np.random.RandomState | np.random.Generator | None = None,
        sample_weight: np.ndarray | None = None,
        n_categories: np.ndarray | None = None,
        cat_smooth: float = CAT_SMOOTH,
        min_data_per_group: float | None = None,
        max_cat_to_onehot: int = MAX_CAT_TO_ONEHOT,
        max_cat_threshold: int = MAX_CAT_THRESHOLD,
        cat_l2: float = CAT_L2,
    ) -> None:
        X = np.asarray(X, dtype=np.float64)
        self._sample_weight = sample_weight
        if X.ndim != 2 or X.shape[1] == 0:
            raise ValueError(f"X must be 2-D with at least one column, got shape {X.shape}")
        if criterion is None:
            criterion = "newton" if leaf_weights == "per-leaf" else "error"
        n_samples = X.shape[0]
        if active is None:
            active = np.ones(n_samples, dtype=bool)
        self.settings = TreeSettings(
            max_leaf_nodes=int(max_leaf_nodes),
            max_depth=max_depth,
            min_samples_leaf=int(min_samples_leaf),
            leaf_weights=leaf_weights,
            criterion=criterion,
            weight_prior=float(weight_prior),
            cat_smooth=float(cat_smooth),
            min_data_per_group=min_data_per_group,
            max_cat_to_onehot=int(max_cat_to_onehot),
            max_cat_threshold=int(max_cat_threshold),
            cat_l2=float(cat_l2),
        )
        self.binner_ = FeatureBinner(
            max_bins=max_bins,
            subsample=subsample,
            random_state=random_state,
            n_categories=n_categories,
        ).fit(X, active)
        self.binned_ = self.binner_.transform(X)
        self.binned_columns_ = transpose_bins(self.binned_)
        # The sparse features' bins row by row, for the node histograms (histogram.sparse_bins).
        self.sparse_bins_ = sparse_bins(self.binned_, active)
        # The splits' thresholds by (feature, bin), for the growths (growth.padded_thresholds).
        self._thresholds = padded_thresholds(self.binner_.thresholds_, self.binner_.n_bins_)
        # Histogram slots: the bins of the widest feature, and one for missing values.
        self._n_slots = histogram_slots(int(np.max(self.binner_.n_bins_)))
        # The growths' temporaries, reused from tree to tree by this search and every search
        # restricted from it (the folds and the refit of a cross-fit): see viboost._utils.scratch.
        self._scratch = ScratchArrays()
        self._set_active(active, sample_weight)

    def _set_active(self, active: np.ndarray, sample_weight: np.ndarray | None) -> None:
        n_samples = self.binned_.shape[0]
        active = np.ascontiguousarray(active, dtype=bool)
        if active.shape != (n_samples,):
            raise ValueError(f"active must have shape ({n_samples},)")
        if sample_weight is None:
            sample_weight = np.ones(n_samples)
        self._rows = np.flatnonzero(active).astype(np.int64)
        self._inactive = np.flatnonzero(~active).astype(np.int64)
        #: The last tree grown, its partition and its nodes' positions (for :meth:`leaf_index`).
        self._last: tuple[HistogramTree, RowPartition, np.ndarray] | None = None
        # A row counts towards min_samples_leaf as its sample weight (k copies of a row count
        # k times), never when inactive.
        self._counts = np.where(active, np.asarray(sample_weight, dtype=np.float64), 0.0)
        # The root's count histogram (the same rows every round): summed by the first tree,
        # then copied into every root's histogram (partition.root_histograms).
        self._root_counts: np.ndarray | None = None

    @property
    def fits_intercept(self) -> bool:
        """Whether a fit starts with the intercept ``c_0`` (per-leaf weights)."""
        return self.settings.per_leaf

    @property
    def per_leaf(self) -> bool:
        """Whether the trees' leaves carry their own weights."""
        return self.settings.per_leaf

    def restricted(self, active: np.ndarray) -> TreeSearch:
        """The same search over the same bins for the rows ``active`` only."""
        other = TreeSearch.__new__(TreeSearch)
        other.__dict__.update(self.__dict__)
        other._set_active(active, self._sample_weight)
        return other

    def intercept(self) -> HistogramTree:
        """The tree of one leaf: the intercept ``c_0`` (a base classifier that is 1 everywhere)."""
        return intercept_tree()

    def best(
        self,
        weights: np.ndarray,
        y: np.ndarray,
        margin: np.ndarray | None = None,
        total: float = 1.0,
    ) -> tuple[HistogramTree, float]:
        """Grow the round's tree under the search weights
        (:class:`~viboost.boosting.growth.TreeGrowth` over this search's rows).

        Parameters
        ----------
        weights : ndarray of shape (n_samples,)
            The round's search weights (:mod:`viboost.boosting.reweighting`), summing to one.
        y : ndarray of shape (n_samples,)
            Labels in {-1, +1}.
        margin : ndarray of shape (n_samples,), default=None
            The ensemble ``H`` (for the curvature of the Newton score; 0 when None).
        total : float, default=1.0
            The weights' sum before normalisation, to put the prior in their units.

        Returns
        -------
        tree : HistogramTree
        error : float
            The weighted error of the tree's leaf signs (0 for the Newton score).
        """
        return self.best_together([self], [weights], y, [margin], [total])[0]

    @staticmethod
    def best_together(
        searches: Sequence[TreeSearch],
        weights: Sequence[np.ndarray],
        y: np.ndarray | Sequence[np.ndarray],
        margins: Sequence[np.ndarray | None],
        totals: Sequence[float],
    ) -> list[tuple[HistogramTree, float]]:
        """:meth:`best` of several searches over the same bins (the folds of a cross-fit, each
        restricted to its rows, or the classes of a K-class fit), their trees grown in
        lockstep: each step splits one node of every tree and histograms the children in one
        parallel pass, every step in one compiled call
        (:func:`~viboost.boosting.partition.grow_in_place`). Each tree is the one
        its own :meth:`best` grows. ``y``: the labels of every search, or one array per
        search."""
        labels = [y] * len(searches) if isinstance(y, np.ndarray) else list(y)
        first_search = searches[0]
        if any(
            s.binned_ is not first_search.binned_ or s.settings != first_search.settings
            for s in searches
        ):
            return [
                s.best(w, y_k, m, t)
                for s, w, y_k, m, t in zip(searches, weights, labels, margins, totals, strict=True)
            ]
        labels = [np.ascontiguousarray(y_k, dtype=np.float64) for y_k in labels]
        sizes = np.array([s._rows.size for s in searches])
        offsets = np.concatenate([[0], np.cumsum(sizes)])
        scratch = first_search._scratch
        stats = scratch.take((int(offsets[-1]), 3))
        for k, (search, w, y_k, margin) in enumerate(
            zip(searches, weights, labels, margins, strict=True)
        ):
            search.settings.row_statistics(
                search._rows, w, y_k, margin, search._counts, stats[offsets[k] : offsets[k + 1]]
            )
        try:
            partitions = RowPartition.stacked(
                first_search.binned_,
                [s._rows for s in searches],
                stats,
                n_slots=first_search._n_slots,
                columns=first_search.binned_columns_,
                scratch=scratch,
                sparse=first_search.sparse_bins_,
            )
            roots, counts = root_histograms(partitions, [s._root_counts for s in searches])
            for search, count in zip(searches, counts, strict=True):
                search._root_counts = count
            first_binner = first_search.binner_
            growths = TreeGrowths(
                roots,
                first_binner.n_bins_,
                first_search._thresholds,
                first_search.settings,
                [s.settings.prior(float(total)) for s, total in zip(searches, totals, strict=True)],
                is_categorical=first_binner.is_categorical_,
            )
            grow_in_place(partitions, growths, roots)
            # The grown partitions keep their rows and ranges (for leaf_index); the statistics
            # and buffers (two float64 copies of three columns of every fold's rows) go back to
            # the scratch pool for the next tree.
            partitions[0].release()
            out = []
            for t, (search, rows) in enumerate(zip(searches, partitions, strict=True)):
                nodes, error = growths.tree(t)
                tree = HistogramTree(nodes, search.settings.leaf_weights)
                search._last = (tree, rows, growths.node_positions(t))
                out.append((tree, error))
        finally:
            scratch.reclaim()  # the nodes' histograms: the growths end here
        return out

    def outputs(self, tree: BaseLearner) -> np.ndarray:
        """``h(x_n)`` (the tree's leaf values) for every row of the search."""
        if not isinstance(tree, HistogramTree):
            raise TypeError(f"a tree search has no outputs of a {type(tree).__name__}")
        return tree.leaf_values[self.leaf_index(tree)]

    def leaf_index(self, tree: HistogramTree) -> np.ndarray:
        """The leaf number of every row of the search: from the last growth's partition when
        ``tree`` is the last tree grown (the other rows routed by their bins), else by routing
        every row's bins."""
        last = getattr(self, "_last", None)
        if last is None or last[0] is not tree:
            return tree.leaf_index(self.binned_columns_)
        _, rows, positions = last
        self._last = None  # used once (a later call routes the bins): free the partition
        out = partition_leaf_index(rows, tree, positions, self.binned_columns_, self._inactive)
        rows.release_rows()  # read: back to the scratch pool once every fold's is
        return out
