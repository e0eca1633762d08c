"""The base-learner seam: what the boosting loop needs of a base classifier and of its search.

The paper's model takes any base classifiers ``h_t`` (section 2); the engine talks to them
through two small protocols, so that a new kind of learner is one new module:

- :class:`BaseLearner`: one fitted base classifier. It gives its outputs ``h(x_n)`` on the
  binned training rows (read during ``fit``, where the raw features are no longer needed), its
  *node arrays* (:data:`NODE_DTYPE`, the layout of scikit-learn HGB's predictor records and of
  LightGBM's model arrays), from which :mod:`viboost.boosting.predictor` predicts any ensemble
  with one compiled kernel (and :mod:`viboost.boosting.tree_shap` its exact Shapley values),
  and the features and gains of its splits.
- :class:`LearnerSearch`: built once per fit over the binned rows; ``best(weights, y)`` returns
  the learner of least weighted error under the round's weights (section 5 and S.6: the stump of
  largest approximate mode, or of largest Newton step towards the exact mode, is the one of
  least weighted error under the weights of :mod:`viboost.boosting.reweighting`).

Two learners stand behind this seam: the decision stump
(:class:`viboost.boosting.stumps.DecisionStump`, the paper's) and the histogram tree
(:class:`viboost.boosting.trees.HistogramTree`). A tree with per-leaf weights is one base
classifier per leaf; its search (:class:`~viboost.boosting.tree_search.TreeSearch`) also takes the
margins and the weights' total (``best(weights, y, margin, total)``), says so by ``per_leaf``,
gives each row's leaf (``leaf_index``) and a one-leaf ``intercept()`` for the first round.
Nothing in :mod:`viboost.variational` sees a learner: a round's inference reads only the
outputs ``h(x_n)``, or each row's leaf (:class:`~viboost.variational.RoundRows`).

Node arrays
-----------
A learner is a binary tree of nodes, the root first. A split node sends a row left when its
feature is ``<= threshold`` (in the units of ``X``), or, in the bins of the fit, when its bin is
``<= bin_threshold``; a missing value (NaN) goes left when ``missing_left``. A leaf holds the
learner's output ``value`` there (+-1 for a stump, the mode of the leaf's weight posterior for a
tree with per-leaf weights). ``gain`` is the split's score from the search (0 for leaves).
``cover`` is the training weight that reached the node when the learner was fitted (the
multiplicities of the booster that fitted it: ``s_n``, or ``s_n phi_n`` in a refit); NaN where
it was not recorded. Path-dependent TreeSHAP (:mod:`viboost.explain`) weighs the two sides of a
split by their covers.

A *categorical* split (``is_categorical``; issue 53) sends a row left when its feature's code
``k`` (an integral value ``0 <= k < 256``) has bit ``k`` set in ``left_categories`` (four
``uint64`` words, bit ``k % 64`` of word ``k // 64``); its bins are its codes, so the same
bitset routes the binned rows. A missing value, and any other value (negative, not integral, a
code never seen at fit), goes to the missing side. Such a node has ``threshold`` NaN and
``bin_threshold`` -1; a numeric node has ``is_categorical`` False and zero words. Node arrays of
an older layout (without those two fields, as pickled by viboost 0.3) are brought to this one
by :func:`current_nodes`.
"""

from __future__ import annotations

from typing import Protocol

import numpy as np

__all__ = [
    "NODE_DTYPE",
    "BaseLearner",
    "LearnerSearch",
    "current_nodes",
    "split_features",
]

#: One record per node (scikit-learn HGB's ``PREDICTOR_RECORD_DTYPE`` in spirit): leaves have
#: ``feature == -1`` and children ``-1``.
NODE_DTYPE = np.dtype(
    [
        ("value", np.float64),
        ("feature", np.int64),
        ("threshold", np.float64),
        ("bin_threshold", np.int16),
        ("missing_left", np.bool_),
        ("left", np.int64),
        ("right", np.int64),
        ("is_leaf", np.bool_),
        ("gain", np.float64),
        ("cover", np.float64),
        ("is_categorical", np.bool_),
        ("left_categories", np.uint64, (4,)),
    ]
)


def current_nodes(nodes: np.ndarray) -> np.ndarray:
    """``nodes`` in the layout of :data:`NODE_DTYPE`: returned as is when already so, else (an
    array of an older layout, without the categorical fields) copied field by field into a new
    array with ``is_categorical`` False and zero ``left_categories`` (numeric splits only)."""
    nodes = np.asarray(nodes)
    if nodes.dtype == NODE_DTYPE:
        return nodes
    names = nodes.dtype.names
    if names is None:
        raise TypeError(f"node arrays must be structured arrays, got dtype {nodes.dtype}")
    out = np.zeros(nodes.shape, dtype=NODE_DTYPE)
    current = NODE_DTYPE.names or ()
    for name in names:
        if name in current:
            out[name] = nodes[name]
    return out


class BaseLearner(Protocol):
    """A fitted base classifier ``h``, as the engine, the predictor and the explainer use it."""

    @property
    def nodes(self) -> np.ndarray:
        """The learner as node arrays (:data:`NODE_DTYPE`), root first."""
        ...

    def predict(self, X: np.ndarray) -> np.ndarray:
        """``h(x)`` for each row of the 2-D float array ``X`` (NaN for missing values)."""
        ...

    def binned_outputs(self, binned_columns: np.ndarray) -> np.ndarray:
        """``h(x_n)`` from the bins of the fit's rows, ``binned_columns[j, n]`` being row ``n``'s
        bin of feature ``j``; equal to :meth:`predict` on those rows."""
        ...

    def split_gains(self) -> tuple[np.ndarray, np.ndarray]:
        """The features of the splits that separate rows (a split that sends every value one
        way does not count) and their gains, as two arrays."""
        ...

    def with_covers(self, leaf_covers: np.ndarray) -> BaseLearner:
        """The same learner with the training weight that reached each leaf (in leaf order)
        recorded, for path-dependent SHAP values."""
        ...


class LearnerSearch(Protocol):
    """The search for a round's base learner over the rows of one fit."""

    def best(self, weights: np.ndarray, y: np.ndarray) -> tuple[BaseLearner, float]:
        """The learner of least weighted error and that error; ``weights`` are nonnegative and
        sum to one, ``y`` holds labels in {-1, +1}."""
        ...

    def outputs(self, learner: BaseLearner) -> np.ndarray:
        """``h(x_n)`` for the search's rows, for a learner :meth:`best` returned."""
        ...

    def restricted(self, active: np.ndarray) -> LearnerSearch:
        """The same search over the same binning for the rows ``active`` only (a fold, or the
        rows of positive multiplicity of a refit)."""
        ...


def split_features(nodes: np.ndarray) -> np.ndarray:
    """The features of the split nodes of a node array (leaves left out)."""
    return nodes["feature"][~nodes["is_leaf"]]
