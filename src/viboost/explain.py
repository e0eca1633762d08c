"""Exact per-feature contributions (SHAP values) of a fitted VIBoost ensemble.

The ensemble log-odds is ``H(x) = sum_t alpha_t h_t(x)``. Shapley values are additive over the
terms of a sum, so the SHAP values of the whole model are the sums of each base learner's,
``alpha_t`` times its own. Every learner is a tree in its node arrays
(:data:`~viboost.boosting.learners.NODE_DTYPE`), and :mod:`viboost.boosting.tree_shap` computes
exact TreeSHAP values of the whole ensemble from them, in one compiled pass, with one of two
value functions:

- **no background** (``background=None``): *path-dependent* TreeSHAP (shap's
  ``feature_perturbation="tree_path_dependent"``, LightGBM's ``pred_contrib=True``, XGBoost's
  ``pred_contribs=True``). A feature left out of a coalition sends the row down both sides of
  its splits, in proportion to the training weight (``cover``) that went each way when the
  learner was fitted; the expected value is the cover-weighted mean of ``H``. Needs no data,
  only the covers that the booster records in the learners; a model fitted by a viboost version
  that did not record them raises ``ValueError`` and needs a background.
- **a background** (rows ``b``, optionally weighted): *interventional* TreeSHAP (shap's
  ``feature_perturbation="interventional"`` with every background row),
  ``v(S) = E_b[H(x_S, b_{not S})]``, and the expected value ``E_b[H(b)]``.

Either way ``phi_0 + sum_j phi_j(x) = H(x)``, ``phi_0`` the expected value (bias), up to float
rounding. A model of K > 2 classes has one ensemble per class (``estimators_`` a list of K
learners per round, ``alphas_`` of shape (n_rounds, K)), and each class's margin ``F_k`` is
explained the same way: :func:`predict_contributions` returns one array per class along a last
axis, shap's layout for multi-output models, and :func:`to_shap_tree_model` gives shap a model
with K outputs. A learner whose splits all use one feature (a decision stump) gives that feature all
of its value, and both value functions agree on its form:

.. math::

    \\phi_j(x) = \\sum_{t : j_t = j} \\alpha_t \\big(h_t(x) - E[h_t]\\big),
    \\qquad \\phi_0 = \\sum_t \\alpha_t E[h_t],

with ``E[h_t]`` from the covers (path-dependent) or over the background (interventional):
``O(n_stumps * (n_samples + n_background))``. Deeper trees cost, per learner,
``O(n_samples * leaves * depth^2)`` path-dependent and ``O(n_samples * n_background * nodes
visited)`` interventional. Missing values follow each split's ``missing_left``, in ``x`` as in
the background. Passing the training ``X`` as background (with ``sample_weight`` as
``background_weight``) gives, for stumps, the path-dependent values of the training covers.

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
>>> contrib = clf.predict_contributions(X[:4])  # path-dependent, from the recorded covers
>>> contrib.shape
(4, 4)
>>> bool(np.allclose(contrib.sum(axis=1), clf.decision_function(X[:4])))
True
>>> against = clf.predict_contributions(X[:4], background=X[:30])  # interventional
>>> bool(np.allclose(against.sum(axis=1), clf.decision_function(X[:4])))
True
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
from sklearn.exceptions import NotFittedError
from sklearn.utils.validation import check_is_fitted, validate_data

from viboost._utils.parallel import kernel_threads, numba_threads
from viboost._utils.validation import reject_non_numeric_columns
from viboost.boosting.learners import BaseLearner
from viboost.boosting.tree_shap import interventional_shap, path_dependent_shap

__all__ = [
    "learner_contributions",
    "predict_contributions",
    "shap_explainer",
    "to_shap_tree_model",
]

#: What a model without recorded covers needs to be explained.
_NO_COVERS = (
    "this model was fitted by a viboost version that did not record covers; pass "
    "background=... (e.g. background=X_train, with background_weight=sample_weight for a "
    "weighted fit) for interventional SHAP values, or refit the model: path-dependent values "
    "need the training weight that reached each node"
)


def _check_fitted(model: Any) -> None:
    """scikit-learn's fitted check for an estimator; for anything else (a view of one class's
    ensemble, say), that it has ``estimators_`` and ``alphas_``."""
    if hasattr(model, "fit"):
        check_is_fitted(model)
    if not (hasattr(model, "estimators_") and hasattr(model, "alphas_")):
        raise NotFittedError(
            f"This {type(model).__name__} has no estimators_ and alphas_: explain a fitted model."
        )


def _ensembles(model: Any) -> list[tuple[list[BaseLearner], np.ndarray]]:
    """The (learners, alphas) of each output of a fitted model: one for two classes, one per
    class for K > 2 (``alphas_`` of shape (n_rounds, K), ``estimators_`` a list of K learners
    per round)."""
    alphas = np.asarray(model.alphas_, dtype=np.float64)
    if alphas.ndim == 1:
        return [(list(model.estimators_), alphas)]
    if alphas.ndim != 2 or alphas.shape[0] != len(model.estimators_):
        raise ValueError(
            f"alphas_ of shape {alphas.shape} does not match {len(model.estimators_)} rounds of "
            "estimators_."
        )
    return [
        ([per_class[k] for per_class in model.estimators_], alphas[:, k])
        for k in range(alphas.shape[1])
    ]


def _checked_rows(model: Any, X: object) -> np.ndarray:
    """Rows checked as the model's predictions check them: the features (and feature names)
    seen in ``fit``, categorical columns as their codes, float64 with NaN allowed."""
    validate = getattr(model, "_validate_X", None)
    if validate is not None:  # a VIBoostClassifier: its own checks and encoding
        return validate(X, reset=False)
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


def _recorded_covers(node_arrays: Sequence[np.ndarray]) -> None:
    """Raise the no-covers ``ValueError`` when a learner has a NaN cover."""
    for t, nodes in enumerate(node_arrays):
        if np.isnan(nodes["cover"]).any():
            raise ValueError(f"learner {t} has no recorded covers: {_NO_COVERS}.")


def _node_covers(nodes: np.ndarray, background: np.ndarray, weights: np.ndarray) -> np.ndarray:
    """The background weight that reaches each node of a learner (a split sends ``x <=
    threshold`` left, and NaN left when ``missing_left``)."""
    covers = np.zeros(nodes.size)
    stack = [(0, np.ones(background.shape[0], dtype=bool))]
    while stack:
        i, reach = stack.pop()
        covers[i] = weights @ reach
        node = nodes[i]
        if node["is_leaf"]:
            continue
        left = _goes_left(node, background[:, node["feature"]])
        stack.append((int(node["left"]), reach & left))
        stack.append((int(node["right"]), reach & ~left))
    return covers


def _goes_left(node: np.void, column: np.ndarray) -> np.ndarray:
    """Which values of ``column`` a split sends left (the numpy twin of
    :func:`viboost.boosting.predictor.goes_left_raw`): a numeric split ``x <= threshold``; a
    categorical one the codes whose bit is set in ``left_categories``; NaN, and on a
    categorical split any value that is not a code ``0..255``, to the ``missing_left`` side."""
    if not node["is_categorical"]:
        left = column <= node["threshold"]
        missing = np.isnan(column)
    else:
        words = np.asarray(node["left_categories"], dtype="<u8")
        bits = np.unpackbits(words.view(np.uint8), bitorder="little").astype(bool)
        with np.errstate(invalid="ignore"):
            code = (column >= 0) & (column < bits.size) & (column == np.floor(column))
        left = np.zeros(column.shape, dtype=bool)
        left[code] = bits[column[code].astype(np.intp)]
        missing = ~code
    return np.where(missing, bool(node["missing_left"]), left)


def _preorder(nodes: np.ndarray) -> list[int]:
    """The nodes reachable from the root, each before its children."""
    order, stack = [], [0]
    while stack:
        i = stack.pop()
        order.append(i)
        if not nodes["is_leaf"][i]:
            stack.extend((int(nodes["right"][i]), int(nodes["left"][i])))
    return order


def learner_contributions(
    learners: Sequence[BaseLearner],
    alphas: Sequence[float] | np.ndarray,
    X: np.ndarray,
    background: np.ndarray | None = None,
    background_weight: object = None,
    n_jobs: int | None = None,
) -> np.ndarray:
    """Exact SHAP values of ``sum_t alphas[t] * h_t(x)`` on validated float arrays.

    Path-dependent TreeSHAP from the learners' recorded covers without a background,
    interventional TreeSHAP against the background with one
    (:mod:`viboost.boosting.tree_shap`).

    Parameters
    ----------
    learners : sequence of BaseLearner
        The base classifiers ``h_t`` (anything with node arrays ``nodes``).
    alphas : sequence of float
        Their weights ``alpha_t``, one per learner.
    X : ndarray of shape (n_samples, n_features)
        Rows to explain (float, NaN allowed).
    background : ndarray of shape (n_background, n_features), default=None
        Rows over which the expectation of each learner is taken (interventional values);
        ``None`` for path-dependent values from the recorded covers.
    background_weight : ndarray of shape (n_background,), default=None
        Nonnegative weights of the background rows; uniform when ``None``.
    n_jobs : int or None, default=None
        Threads for the compiled kernels: None means all cores (or an enclosing
        :func:`joblib.parallel_config`'s ``n_jobs``), -1 all cores; small calls run on one
        thread. The values are the same for any number.

    Returns
    -------
    ndarray of shape (n_samples, n_features + 1)
        Column ``j < n_features`` is the contribution of feature ``j``; the last column is the
        expected value ``sum_t alpha_t E[h_t]``, the same on every row. Each row sums to
        ``sum_t alpha_t h_t(x)``.

    Raises
    ------
    ValueError
        Without a background, if a learner has no recorded covers.

    Examples
    --------
    A stump on feature 1 that sent 3 units of training weight left and 1 right (path-dependent,
    ``E[h] = (3 * -1 + 1 * 1) / 4``), then against a background of four rows:

    >>> import numpy as np
    >>> from viboost.boosting.stumps import DecisionStump
    >>> stump = DecisionStump(1, 0.0, 1, False, covers=(3.0, 1.0))
    >>> X = np.array([[5.0, -1.0], [5.0, 1.0]])
    >>> learner_contributions([stump], [2.0], X)
    array([[ 0., -1., -1.],
           [ 0.,  3., -1.]])
    >>> learner_contributions([stump], [2.0], X, background=np.array([[0.0, -1.0], [0.0, -2.0],
    ...                                                                [0.0, 3.0], [0.0, 4.0]]))
    array([[ 0., -2.,  0.],
           [ 0.,  2.,  0.]])
    """
    alphas = np.asarray(alphas, dtype=np.float64)
    if alphas.shape != (len(learners),):
        raise ValueError(f"got {len(learners)} learners but {alphas.shape} alphas.")
    if X.ndim != 2:
        raise ValueError(f"X must be 2-D, got an array of shape {X.shape}.")
    node_arrays = [learner.nodes for learner in learners]
    n_features = X.shape[1]
    work = X.shape[0] * max(len(learners), 1)
    if background is None:
        _recorded_covers(node_arrays)
        with numba_threads(kernel_threads(n_jobs, work)):
            values, expected = path_dependent_shap(node_arrays, alphas, X)
    else:
        if background.ndim != 2 or background.shape[1] != n_features:
            raise ValueError(
                f"X {X.shape} and background {background.shape} must be 2-D with the same "
                "number of columns."
            )
        weights = _background_weights(background_weight, background.shape[0])
        with numba_threads(kernel_threads(n_jobs, work * background.shape[0])):
            values, expected = interventional_shap(node_arrays, alphas, X, background, weights)
    out = np.empty((X.shape[0], n_features + 1))
    out[:, :n_features] = values
    out[:, n_features] = expected
    return out


def predict_contributions(
    model: Any,
    X: object,
    background: object = None,
    background_weight: object = None,
) -> np.ndarray:
    """Exact SHAP values of ``model.decision_function(X)``, plus the expected value.

    The output has the layout of LightGBM's ``predict(X, pred_contrib=True)`` and XGBoost's
    ``predict(X, pred_contribs=True)``: one column per feature and a last column for the bias.
    Without a background the values are path-dependent TreeSHAP from the training weight
    (``cover``) that the model recorded at each node of each learner (what LightGBM and
    XGBoost report); with one they are interventional TreeSHAP against its rows.

    Parameters
    ----------
    model : VIBoostClassifier
        A fitted model (anything with ``estimators_`` and ``alphas_``; its ``n_jobs``, if any,
        sets the threads), of two classes or more.
    X : array-like of shape (n_samples, n_features)
        Rows to explain, checked like :meth:`~viboost.VIBoostClassifier.decision_function` does.
    background : array-like of shape (n_background, n_features), default=None
        ``None``: path-dependent values from the recorded covers, no data needed. Otherwise
        the rows that define the expectation (interventional values), e.g. the training ``X``
        or a sample of it; checked the same way as ``X``.
    background_weight : array-like of shape (n_background,), default=None
        Nonnegative weights of the background rows (e.g. the training ``sample_weight``);
        uniform when ``None``.

    Returns
    -------
    ndarray of shape (n_samples, n_features + 1), or (n_samples, n_features + 1, n_classes)
        Contributions of each feature to ``H(x)`` and, last, the expected value (``E[H]`` under
        the covers, or over the background); each row sums to ``decision_function(X)`` up to
        float rounding. For K > 2 classes, one such array per class along the last axis (shap's
        layout for multi-output models), ``[:, :, k]`` summing to ``decision_function(X)[:, k]``.

    Raises
    ------
    ValueError
        If ``background`` is ``None`` and the model did not record covers (fitted by an older
        viboost), or ``X`` or ``background`` do not have the features seen in ``fit``.

    Examples
    --------
    >>> import numpy as np
    >>> from viboost import VIBoostClassifier
    >>> X = np.array([[0.0, 1.0], [1.0, 0.0], [2.0, 1.0], [3.0, 0.0]] * 5)
    >>> y = np.array([0, 0, 1, 1] * 5)
    >>> clf = VIBoostClassifier(3, preset="paper").fit(X, y)
    >>> phi = predict_contributions(clf, X[:2])
    >>> bool(np.allclose(phi.sum(axis=1), clf.decision_function(X[:2])))
    True
    >>> phi[:, 1]  # the second feature is never used
    array([0., 0.])
    >>> phi = predict_contributions(clf, X[:2], background=X[:8])
    >>> bool(np.allclose(phi.sum(axis=1), clf.decision_function(X[:2])))
    True
    """
    _check_fitted(model)
    X = _checked_rows(model, X)
    if background is not None:
        background = _checked_rows(model, background)
    per_output = [
        learner_contributions(
            learners,
            alphas,
            X,
            background,
            background_weight=background_weight,
            n_jobs=getattr(model, "n_jobs", None),
        )
        for learners, alphas in _ensembles(model)
    ]
    if np.ndim(model.alphas_) == 1:
        return per_output[0]
    return np.stack(per_output, axis=-1)


def to_shap_tree_model(
    model: Any,
    background: object = None,
    background_weight: object = None,
) -> dict[str, Any]:
    """The ensemble in the custom-model dict format of ``shap.TreeExplainer``.

    Each learner becomes a tree from its node arrays
    (:data:`~viboost.boosting.learners.NODE_DTYPE`): splits ``x[feature] <= threshold`` going
    left (as shap does), NaN to the ``missing_left`` side, and leaves of value ``alpha_t`` times
    the learner's output there. The node sample weights (covers) are the learner's recorded
    covers when ``background`` is ``None`` (the training weight that reached each node), so that
    shap's ``feature_perturbation="tree_path_dependent"`` gives the values of
    ``predict_contributions(model, X)``; with a background they are the background weights that
    reach each node (the root's is their total), and shap's path-dependent values are those of
    these covers. (With ``data=``, shap recomputes the covers from the data it is given.)
    ``tree_output`` is ``"raw_value"``: explain it with ``model_output="raw"``, the log-odds
    ``decision_function``. For K > 2 classes the model has K outputs (shap's multi-output
    models): each tree's ``values`` has K columns, non-zero only in its class's, so that shap
    returns values of shape (n_samples, n_features, K) and K expected values, those of
    ``predict_contributions``.

    Parameters
    ----------
    model : VIBoostClassifier
        A fitted model.
    background : array-like of shape (n_background, n_features), default=None
        Rows whose weights make the covers; ``None`` for the recorded covers.
    background_weight : array-like of shape (n_background,), default=None
        Weights of the background rows; uniform when ``None``.

    Returns
    -------
    dict
        ``{"trees": [...], "base_offset": 0.0, "tree_output": "raw_value", "input_dtype":
        np.float64, "internal_dtype": np.float64}``; each tree is a dict of arrays
        ``children_left``, ``children_right``, ``children_default``, ``features``,
        ``thresholds``, ``values`` (shape (n_nodes, 1), or (n_nodes, n_classes) for K > 2
        classes) and ``node_sample_weight``; for K classes the trees of class 0 come first,
        then those of class 1, and so on.

    Raises
    ------
    ValueError
        If ``background`` is ``None`` and the model did not record covers, or if it splits on
        categorical features (shap's format has thresholds only).

    Examples
    --------
    >>> import numpy as np
    >>> from viboost import VIBoostClassifier
    >>> X = np.array([[0.0], [1.0], [2.0], [3.0]] * 5)
    >>> clf = VIBoostClassifier(1, preset="paper").fit(X, np.array([0, 0, 1, 1] * 5))
    >>> tree = to_shap_tree_model(clf)["trees"][0]  # the covers recorded in fit
    >>> tree["children_left"], tree["children_right"], tree["node_sample_weight"]
    (array([ 1, -1, -1]), array([ 2, -1, -1]), array([20., 10., 10.]))
    >>> to_shap_tree_model(clf, background=X[:6])["trees"][0]["node_sample_weight"]
    array([6., 4., 2.])
    """
    _check_fitted(model)
    ensembles = _ensembles(model)
    if any(np.any(learner.nodes["is_categorical"]) for ls, _ in ensembles for learner in ls):
        raise ValueError(
            "The model splits on categorical features, which shap's tree format cannot "
            "express (a split there is a threshold): use viboost.explain.predict_contributions "
            "(TreeSHAP with category-set splits) instead."
        )
    if background is None:
        for learners, _ in ensembles:
            _recorded_covers([learner.nodes for learner in learners])
    else:
        background = _checked_rows(model, background)
        weights = _background_weights(background_weight, background.shape[0])
    n_outputs = len(ensembles)
    trees = []
    for output, (learners, alphas) in enumerate(ensembles):
        for learner, alpha in zip(learners, alphas, strict=True):
            nodes = learner.nodes
            if background is None:
                covers = np.array(nodes["cover"], dtype=np.float64)
            else:
                covers = _node_covers(nodes, background, weights)
            leaf = nodes["is_leaf"]
            values = np.where(leaf, float(alpha) * nodes["value"], 0.0)
            # An inner node's value is the cover-weighted mean of its children's (as shap
            # recomputes it), children before parents.
            for i in reversed(_preorder(nodes)):
                if not leaf[i]:
                    left, right = nodes["left"][i], nodes["right"][i]
                    total = covers[left] + covers[right]
                    if total > 0:
                        values[i] = (
                            covers[left] * values[left] + covers[right] * values[right]
                        ) / total
            columns = np.zeros((nodes.size, n_outputs))
            columns[:, output] = values  # a tree adds to its own class's margin only
            default = np.where(nodes["missing_left"], nodes["left"], nodes["right"])
            trees.append(
                {
                    "children_left": np.where(leaf, -1, nodes["left"]),
                    "children_right": np.where(leaf, -1, nodes["right"]),
                    "children_default": np.where(leaf, -1, default),
                    "features": np.where(leaf, -2, nodes["feature"]),
                    "thresholds": np.where(leaf, -2.0, nodes["threshold"]),
                    "values": columns,
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


def shap_explainer(model: Any, background: object = None) -> Any:
    """A ``shap.TreeExplainer`` of ``model.decision_function`` (raw log-odds).

    For a model of K > 2 classes the explainer has K outputs (one per class's margin ``F_k``):
    its ``shap_values(X)`` has shape (n_samples, n_features, K) and its ``expected_value`` K
    entries, those of ``predict_contributions(model, X)`` (of shape (n_samples, n_features + 1,
    K)).

    Without a background: path-dependent (``feature_perturbation="tree_path_dependent"``) over
    the recorded covers, whose ``shap_values(X)`` equal ``predict_contributions(model,
    X)[:, :-1]`` to float64 rounding. With one: interventional over *every* background row (a
    ``shap.maskers.Independent`` masker with ``max_samples`` set to their number: shap's
    default masker would keep a sample of 100), whose values equal
    ``predict_contributions(model, X, background)[:, :-1]``; shap's interventional algorithm
    holds its per-leaf terms in single precision (shap 0.51), so they agree to about ``1e-7``
    times ``sum_t |alpha_t|`` (the ``expected_value`` to float64 rounding), and it compares
    values with thresholds rounded to float32, so a value within that rounding of a threshold
    may go the other way there. shap refuses path-dependent values for a tree with a leaf of
    zero cover (e.g. a stump that sends every training row one way), which
    :func:`predict_contributions` handles. Needs the optional dependency ``shap``.

    Parameters
    ----------
    model : VIBoostClassifier
        A fitted model.
    background : array-like of shape (n_background, n_features), default=None
        Background rows (unweighted: shap's interventional mode takes no weights), or ``None``.

    Returns
    -------
    shap.TreeExplainer
    """
    import shap

    _check_fitted(model)
    if background is None:
        return shap.TreeExplainer(
            to_shap_tree_model(model),
            feature_perturbation="tree_path_dependent",
            model_output="raw",
        )
    data = _checked_rows(model, background)
    return shap.TreeExplainer(
        to_shap_tree_model(model, data),
        data=shap.maskers.Independent(data, max_samples=data.shape[0]),
        feature_perturbation="interventional",
        model_output="raw",
    )
