"""Exact per-feature contributions (SHAP values) of a fitted VIBoost ensemble.

The ensemble log-odds is ``H(x) = sum_t alpha_t h_t(x)``. Shapley values are additive over the
terms of a sum, so the SHAP values of the whole model are the sum of each base learner's, which
the learner computes itself (:meth:`~viboost.boosting.learners.BaseLearner.contributions`). For
the decision stump (:class:`~viboost.boosting.stumps.DecisionStump`), a function of a single
feature ``j_t``, that feature gets all of its value, so the values are exact and cheap:

.. math::

    \\phi_j(x) = \\sum_{t : j_t = j} \\alpha_t \\big(h_t(x) - E_b[h_t(b)]\\big),
    \\qquad \\phi_0 = \\sum_t \\alpha_t E_b[h_t(b)],

where the expectation is over a background distribution ``b`` (rows of a background data set,
optionally weighted) and ``phi_0`` is the expected value (bias), so that
``phi_0 + sum_j phi_j(x) = H(x)``. For one-feature terms the interventional value function
(``v(S) = E_b[H(x_S, b_{not S})]``) and the path-dependent one of TreeSHAP give the same numbers,
provided the path-dependent covers are the background weights that go each way at the split:
``E_b[h_t] = sum over the two leaves of (leaf value * cover fraction)``. Missing values follow
``missing_right`` of each stump, in ``x`` as in the background. Costs are
``O(n_stumps * (n_samples + n_background))``.

Which background? The fitted model does not record how much training weight went each way at each
stump, so the background must be given. Passing the training ``X`` (with its ``sample_weight`` as
``background_weight``) reproduces what TreeSHAP's path-dependent algorithm would report for stumps
whose covers were the weighted training data; a smaller sample (a few hundred rows) gives the
usual interventional SHAP values with respect to that sample.

Contents
--------
- :func:`predict_contributions` (also :meth:`VIBoostClassifier.predict_contributions
  <viboost.VIBoostClassifier.predict_contributions>`): the contributions, shaped like the
  ``pred_contrib=True`` output of LightGBM and ``pred_contribs=True`` of XGBoost.
- :func:`learner_contributions`: the same on already validated arrays, for any list of base
  learners.
- :func:`to_shap_tree_model` and :func:`shap_explainer`: the ensemble, from its learners' node
  arrays, as the custom-model dict accepted by ``shap.TreeExplainer`` (optional dependency
  ``shap``), which then reports the same values.

Examples
--------
>>> import numpy as np
>>> from viboost import VIBoostClassifier
>>> rng = np.random.default_rng(0)
>>> X = rng.normal(size=(60, 3))
>>> y = (X[:, 0] + 0.5 * X[:, 1] > 0).astype(int)
>>> clf = VIBoostClassifier(5, preset="paper").fit(X, y)
>>> contrib = clf.predict_contributions(X[:4], background=X)
>>> contrib.shape
(4, 4)
>>> bool(np.allclose(contrib.sum(axis=1), clf.decision_function(X[:4])))
True
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
from sklearn.utils.validation import check_is_fitted, validate_data

from viboost._utils.validation import reject_non_numeric_columns
from viboost.boosting.learners import BaseLearner

__all__ = [
    "learner_contributions",
    "predict_contributions",
    "shap_explainer",
    "to_shap_tree_model",
]


def _checked_rows(model: Any, X: object) -> np.ndarray:
    """Rows checked as the model's predictions check them: numeric columns, the features (and
    feature names) seen in ``fit``, float64 with NaN allowed."""
    reject_non_numeric_columns(X, type(model).__name__)
    return validate_data(model, X, reset=False, dtype=np.float64, ensure_all_finite="allow-nan")


def _background_weights(background_weight: object, n_rows: int) -> np.ndarray:
    """Validated background weights (ones when ``None``), not normalised."""
    if n_rows == 0:
        raise ValueError("background must hold at least one row.")
    if background_weight is None:
        return np.ones(n_rows)
    weights = np.asarray(background_weight, dtype=np.float64)
    if weights.shape != (n_rows,):
        raise ValueError(
            f"background_weight has shape {weights.shape}; expected ({n_rows},), one weight per "
            "background row."
        )
    if not np.all(np.isfinite(weights)) or np.any(weights < 0):
        raise ValueError("background_weight must be finite and nonnegative.")
    if weights.sum() <= 0:
        raise ValueError("background_weight must have a positive sum.")
    return weights


def _node_covers(nodes: np.ndarray, background: np.ndarray, weights: np.ndarray) -> np.ndarray:
    """The background weight that reaches each node of a learner (a split sends ``x <=
    threshold`` left, and NaN left when ``missing_left``)."""
    reach = np.zeros((nodes.size, background.shape[0]), dtype=bool)
    reach[0] = True
    for i, node in enumerate(nodes):
        if node["is_leaf"]:
            continue
        column = background[:, node["feature"]]
        left = column <= node["threshold"]
        if node["missing_left"]:
            left |= np.isnan(column)
        reach[node["left"]] = reach[i] & left
        reach[node["right"]] = reach[i] & ~left
    return reach.astype(np.float64) @ weights


def learner_contributions(
    learners: Sequence[BaseLearner],
    alphas: Sequence[float] | np.ndarray,
    X: np.ndarray,
    background: np.ndarray,
    background_weight: np.ndarray | None = None,
) -> np.ndarray:
    """Exact SHAP values of ``sum_t alphas[t] * h_t(x)`` on validated float arrays.

    Parameters
    ----------
    learners : sequence of BaseLearner
        The base classifiers ``h_t`` (e.g. :class:`~viboost.boosting.stumps.DecisionStump`).
    alphas : sequence of float
        Their weights ``alpha_t``, one per learner.
    X : ndarray of shape (n_samples, n_features)
        Rows to explain (float, NaN allowed).
    background : ndarray of shape (n_background, n_features)
        Rows over which the expectation of each learner is taken.
    background_weight : ndarray of shape (n_background,), default=None
        Nonnegative weights of the background rows; uniform when ``None``.

    Returns
    -------
    ndarray of shape (n_samples, n_features + 1)
        Column ``j < n_features`` is the contribution of feature ``j``; the last column is the
        expected value ``sum_t alpha_t E[h_t]``, the same on every row. Each row sums to
        ``sum_t alpha_t h_t(x)``.

    Examples
    --------
    >>> import numpy as np
    >>> from viboost.boosting.stumps import DecisionStump
    >>> stump = DecisionStump(feature=1, threshold=0.0, polarity=1, missing_right=False)
    >>> X = np.array([[5.0, -1.0], [5.0, 1.0]])
    >>> learner_contributions([stump], [2.0], X, background=np.array([[0.0, -1.0], [0.0, -2.0],
    ...                                                                [0.0, 3.0], [0.0, 4.0]]))
    array([[ 0., -2.,  0.],
           [ 0.,  2.,  0.]])
    """
    alphas = np.asarray(alphas, dtype=np.float64)
    if alphas.shape != (len(learners),):
        raise ValueError(f"got {len(learners)} learners but {alphas.shape} alphas.")
    if X.ndim != 2 or background.ndim != 2 or X.shape[1] != background.shape[1]:
        raise ValueError(
            f"X {X.shape} and background {background.shape} must be 2-D with the same number of "
            "columns."
        )
    weights = _background_weights(background_weight, background.shape[0])
    n_features = X.shape[1]
    out = np.zeros((X.shape[0], n_features + 1))
    bias = 0.0
    for learner, alpha in zip(learners, alphas, strict=True):
        values, expected = learner.contributions(X, background, weights)
        out[:, :n_features] += alpha * values
        bias += alpha * expected
    out[:, n_features] = bias
    return out


def _check_background(model: Any, background: object) -> np.ndarray:
    if background is None:
        raise ValueError(
            "predict_contributions needs background data: the fitted model does not record how "
            "much training weight went to each side of each stump. Pass background=X_train (and "
            "background_weight=sample_weight if the model was fitted with one) to reproduce "
            "TreeSHAP's path-dependent values for the training covers, or a sample of a few "
            "hundred rows for interventional SHAP values."
        )
    return _checked_rows(model, background)


def predict_contributions(
    model: Any,
    X: object,
    background: object = None,
    background_weight: object = None,
) -> np.ndarray:
    """Exact SHAP values of ``model.decision_function(X)``, plus the expected value.

    The output has the layout of LightGBM's ``predict(X, pred_contrib=True)`` and XGBoost's
    ``predict(X, pred_contribs=True)``: one column per feature and a last column for the bias.

    Parameters
    ----------
    model : VIBoostClassifier
        A fitted model (anything with ``estimators_`` and ``alphas_``).
    X : array-like of shape (n_samples, n_features)
        Rows to explain, checked like :meth:`~viboost.VIBoostClassifier.decision_function` does.
    background : array-like of shape (n_background, n_features)
        Required. Rows that define the expectation of each stump, e.g. the training ``X`` or a
        sample of it; checked the same way as ``X``.
    background_weight : array-like of shape (n_background,), default=None
        Nonnegative weights of the background rows (e.g. the training ``sample_weight``);
        uniform when ``None``.

    Returns
    -------
    ndarray of shape (n_samples, n_features + 1)
        Contributions of each feature to ``H(x)`` and, last, the expected value
        ``E_background[H]``; each row sums to ``decision_function(X)`` up to float rounding.

    Raises
    ------
    ValueError
        If ``background`` is missing, or ``X`` or ``background`` do not have the features seen
        in ``fit``.

    Examples
    --------
    >>> import numpy as np
    >>> from viboost import VIBoostClassifier
    >>> X = np.array([[0.0, 1.0], [1.0, 0.0], [2.0, 1.0], [3.0, 0.0]] * 5)
    >>> y = np.array([0, 0, 1, 1] * 5)
    >>> clf = VIBoostClassifier(3, preset="paper").fit(X, y)
    >>> phi = predict_contributions(clf, X[:2], background=X)
    >>> bool(np.allclose(phi.sum(axis=1), clf.decision_function(X[:2])))
    True
    >>> phi[:, 1]  # the second feature is never used
    array([0., 0.])
    """
    check_is_fitted(model)
    X = _checked_rows(model, X)
    background = _check_background(model, background)
    return learner_contributions(
        model.estimators_, model.alphas_, X, background, background_weight=background_weight
    )


def to_shap_tree_model(
    model: Any,
    background: object,
    background_weight: object = None,
) -> dict[str, Any]:
    """The ensemble in the custom-model dict format of ``shap.TreeExplainer``.

    Each learner becomes a tree from its node arrays
    (:data:`~viboost.boosting.learners.NODE_DTYPE`): splits ``x[feature] <= threshold`` going
    left (as shap does), NaN to the ``missing_left`` side, and leaves of value ``alpha_t`` times
    the learner's output there (a stump: a root split, a left leaf ``-alpha * polarity``, a right
    leaf ``alpha * polarity``). The node sample weights (covers) are the background weights
    that reach each node (the root's is their total), so
    that shap's ``feature_perturbation="tree_path_dependent"`` mode, which uses them, gives the
    same values as
    :func:`predict_contributions` with this background. (With ``data=``, shap recomputes the covers
    from the data it is given.) ``tree_output`` is ``"raw_value"``: explain it with
    ``model_output="raw"``, the log-odds ``decision_function``.

    Parameters
    ----------
    model : VIBoostClassifier
        A fitted model.
    background : array-like of shape (n_background, n_features)
        Rows whose weights make the covers.
    background_weight : array-like of shape (n_background,), default=None
        Weights of the background rows; uniform when ``None``.

    Returns
    -------
    dict
        ``{"trees": [...], "base_offset": 0.0, "tree_output": "raw_value", "input_dtype":
        np.float64, "internal_dtype": np.float64}``; each tree is a dict of arrays
        ``children_left``, ``children_right``, ``children_default``, ``features``,
        ``thresholds``, ``values`` (shape (3, 1)) and ``node_sample_weight``.

    Examples
    --------
    >>> import numpy as np
    >>> from viboost import VIBoostClassifier
    >>> X = np.array([[0.0], [1.0], [2.0], [3.0]] * 5)
    >>> clf = VIBoostClassifier(1, preset="paper").fit(X, np.array([0, 0, 1, 1] * 5))
    >>> tree = to_shap_tree_model(clf, background=X)["trees"][0]
    >>> tree["children_left"], tree["children_right"], tree["node_sample_weight"]
    (array([ 1, -1, -1]), array([ 2, -1, -1]), array([20., 10., 10.]))
    """
    check_is_fitted(model)
    background = _checked_rows(model, background)
    weights = _background_weights(background_weight, background.shape[0])
    trees = []
    for learner, alpha in zip(model.estimators_, model.alphas_, strict=True):
        nodes = learner.nodes
        covers = _node_covers(nodes, background, weights)
        leaf = nodes["is_leaf"]
        values = np.where(leaf, float(alpha) * nodes["value"], 0.0)
        # An inner node's value is the cover-weighted mean of its children's (children follow
        # their parents in the node arrays, so one backward pass fills them in).
        for i in range(nodes.size - 1, -1, -1):
            if not leaf[i]:
                left, right = nodes["left"][i], nodes["right"][i]
                values[i] = (covers[left] * values[left] + covers[right] * values[right]) / (
                    covers[i]
                )
        default = np.where(nodes["missing_left"], nodes["left"], nodes["right"])
        trees.append(
            {
                "children_left": np.where(leaf, -1, nodes["left"]),
                "children_right": np.where(leaf, -1, nodes["right"]),
                "children_default": np.where(leaf, -1, default),
                "features": np.where(leaf, -2, nodes["feature"]),
                "thresholds": np.where(leaf, -2.0, nodes["threshold"]),
                "values": values[:, None],
                "node_sample_weight": covers,
            }
        )
    return {
        "trees": trees,
        "base_offset": 0.0,
        "tree_output": "raw_value",
        "input_dtype": np.float64,
        "internal_dtype": np.float64,
    }


def shap_explainer(model: Any, background: object) -> Any:
    """A ``shap.TreeExplainer`` of ``model.decision_function`` (interventional, raw log-odds).

    Its ``shap_values(X)`` equal ``predict_contributions(model, X, background)[:, :-1]`` and its
    ``expected_value`` the last column. shap's interventional algorithm holds leaf values in
    single precision (shap 0.51), so the values agree to about ``|alpha_t| * 2**-24`` per stump
    (``expected_value`` to float64 rounding). Needs the optional dependency ``shap``.
    shap warns above 1000 background rows; for the training-cover values on a large
    training set use :func:`predict_contributions` directly.

    Parameters
    ----------
    model : VIBoostClassifier
        A fitted model.
    background : array-like of shape (n_background, n_features)
        Background rows (unweighted: shap's interventional mode takes no weights).

    Returns
    -------
    shap.TreeExplainer
    """
    import shap

    check_is_fitted(model)
    data = _checked_rows(model, background)
    return shap.TreeExplainer(
        to_shap_tree_model(model, data),
        data=data,
        feature_perturbation="interventional",
        model_output="raw",
    )
