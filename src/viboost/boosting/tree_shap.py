"""Exact TreeSHAP of a weighted ensemble of trees, from their node arrays.

The ensemble's margin is ``H(x) = sum_t alpha_t h_t(x)``, ``h_t(x)`` the ``value`` of the leaf
that ``x`` reaches in learner ``t`` (:data:`~viboost.boosting.learners.NODE_DTYPE`: a split sends
``x[feature] <= threshold`` left and a missing value (NaN) left when ``missing_left``). Shapley
values add over the terms of a sum, so each tree is explained on its own, with its leaf values
multiplied by its ``alpha_t``, and the values added in learner order. Two value functions:

- **path-dependent** (:func:`path_dependent_shap`): Lundberg, Erion and Lee's Algorithm 2
  ("Consistent individualized feature attribution for tree ensembles", 2018), as in shap's
  ``TreeExplainer(feature_perturbation="tree_path_dependent")`` and LightGBM's
  ``pred_contrib=True``. ``v(S) = E[h(x_S, .)]`` follows ``x`` at the splits on features of ``S``
  and takes both sides of the others, weighted by the node ``cover`` (the training weight that
  reached each node when the learner was fitted): at a split the left child gets the share
  ``cover[left] / (cover[left] + cover[right])`` (one half each when both are 0; shap divides by the
  node's own cover, the same number when a node's cover is its children's sum, as recorded covers
  are, and refuses a leaf of zero cover). No background data are needed; the expected value is the
  cover-weighted mean of the leaf values. Cost ``O(n_samples * leaves * depth^2)`` per tree (its
  time against shap's C++: :doc:`docs/speed.md </speed>` ("Inside the kernels")).
- **interventional** (:func:`interventional_shap`): ``v(S) = sum_b w_b h(x_S, b_{not S}) /
  sum_b w_b`` over every row ``b`` of a weighted background, as shap's ``TreeExplainer(...,
  data=background, feature_perturbation="interventional")`` with all of its rows. For each
  pair ``(x, b)`` one walk of the tree (Independent TreeSHAP) follows ``x`` and ``b`` together
  and branches where they part on a feature not yet seen: a leaf reached needs the features of
  a set ``A`` from ``x`` and those of a set ``B`` from ``b``, a product game whose Shapley
  values are ``(|A|-1)! |B|! / (|A|+|B|)!`` for each feature of ``A`` and minus
  ``|A|! (|B|-1)! / (|A|+|B|)!`` for each of ``B``, times the leaf value. Cost ``O(n_samples
  * n_background * nodes visited)`` (its time against shap's, which also rounds its thresholds
  and per-leaf terms to float32: :doc:`docs/speed.md </speed>` ("Inside the kernels")).

A learner whose splits all use one feature (a decision stump) gives that feature all of its
value, ``alpha_t (h_t(x) - E[h_t])``; both algorithms take that short cut, which costs
``O(n_samples)`` per learner after ``E[h_t]`` (``O(n_background)`` once, or from the covers).
A learner of one leaf (no split) adds its value to the expected value only.

Both return the values, shape ``(n_samples, n_features)``, and the expected value; each row of
the values plus the expected value is ``H(x)`` up to float rounding. Everything is float64.
The compiled kernels (numba) take rows in fixed blocks and each row adds its terms in learner
order, so the results are the same for any number of threads.

Contents
--------
- :func:`path_dependent_shap` and :func:`interventional_shap`: an ensemble (a list of node
  arrays and their weights).
- :func:`path_dependent_tree_shap` and :func:`interventional_tree_shap`: one learner's node
  array (weight 1), e.g. for a learner's own ``contributions`` method.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numba
import numpy as np

from viboost._utils.parallel import threaded_kernel
from viboost.boosting.predictor import goes_left_raw

__all__ = [
    "interventional_shap",
    "interventional_tree_shap",
    "path_dependent_shap",
    "path_dependent_tree_shap",
]

# Rows per block of the kernels (each block allocates its own scratch arrays).
_BLOCK_ROWS = 64
# A learner whose splits use several features, one feature, or none (a leaf).
_SEVERAL, _CONSTANT = -1, -2


# --- Node arrays of an ensemble ------------------------------------------------------------------


@numba.njit(cache=True)
def _walk_structure(roots, sizes, left, right, is_leaf):  # pragma: no cover - compiled
    """Per learner, the most splits on a path from its root to a leaf, and its nodes in
    depth-first preorder (``order``, learner after learner; ``n_ordered[t]`` of them). Returns
    ``depth[t] = -1`` when a node is reached twice (not a tree)."""
    n_learners = roots.shape[0]
    depth = np.zeros(n_learners, dtype=np.int64)
    order = np.empty(left.shape[0], dtype=np.int64)
    n_ordered = np.zeros(n_learners, dtype=np.int64)
    seen = np.zeros(left.shape[0], dtype=np.bool_)
    at = 0
    for t in range(n_learners):
        stack = np.empty(sizes[t] + 1, dtype=np.int64)
        level = np.empty(sizes[t] + 1, dtype=np.int64)
        stack[0], level[0] = roots[t], 0
        top = 1
        count = 0
        while top > 0:
            top -= 1
            node, d = stack[top], level[top]
            if seen[node] or count == sizes[t]:
                depth[t] = -1
                break
            seen[node] = True
            order[at] = node
            at += 1
            count += 1
            if is_leaf[node]:
                depth[t] = max(depth[t], d)
                continue
            stack[top], level[top] = right[node], d + 1
            stack[top + 1], level[top + 1] = left[node], d + 1
            top += 2
        n_ordered[t] = count
        if depth[t] < 0:
            break
    return depth, order[:at], n_ordered


def _field(part: np.ndarray, name: str, shape: tuple[int, ...], dtype: type) -> np.ndarray:
    """Field ``name`` of a node array, or zeros of that shape per node when it lacks it."""
    if name in (part.dtype.names or ()):
        return np.asarray(part[name], dtype=dtype).reshape((part.size, *shape))
    return np.zeros((part.size, *shape), dtype=dtype)


class _Ensemble:
    """Concatenated, validated node arrays of ``sum_t alphas[t] * h_t`` (as
    :class:`~viboost.boosting.predictor.EnsemblePredictor` lays them out)."""

    def __init__(self, node_arrays: Sequence[np.ndarray], alphas: object, n_features: int) -> None:
        parts = [np.asarray(nodes) for nodes in node_arrays]
        alphas = np.asarray(alphas, dtype=np.float64)
        if alphas.shape != (len(parts),):
            raise ValueError(f"got {len(parts)} node arrays but alphas of shape {alphas.shape}.")
        if not np.all(np.isfinite(alphas)):
            raise ValueError("alphas must be finite.")
        for t, part in enumerate(parts):
            if part.ndim != 1 or part.size == 0:
                raise ValueError(f"node array {t} must be a non-empty 1-D array of nodes.")
            missing = {"value", "feature", "threshold", "missing_left", "left", "right"}
            missing |= {"is_leaf", "cover"}
            missing -= set(part.dtype.names or ())
            if missing:
                raise ValueError(f"node array {t} lacks the fields {sorted(missing)}.")
        sizes = np.array([part.size for part in parts], dtype=np.int64)
        self.n_learners = len(parts)
        self.sizes = sizes
        self.roots = (np.cumsum(sizes) - sizes).astype(np.int64)
        offsets = np.repeat(self.roots, sizes)
        fields = ["value", "feature", "threshold", "missing_left", "left", "right"]
        fields += ["is_leaf", "cover"]
        columns = {
            name: np.concatenate([part[name] for part in parts]) if parts else np.empty(0)
            for name in fields
        }
        self.is_leaf = np.ascontiguousarray(columns["is_leaf"], dtype=np.bool_)
        split = ~self.is_leaf
        local_left = columns["left"].astype(np.int64)
        local_right = columns["right"].astype(np.int64)
        size_of = np.repeat(sizes, sizes)
        bad_child = split & (
            (local_left < 0)
            | (local_left >= size_of)
            | (local_right < 0)
            | (local_right >= size_of)
        )
        if bad_child.any():
            raise ValueError("a split node's children lie outside its node array.")
        feature = columns["feature"].astype(np.int64)
        if np.any(split & ((feature < 0) | (feature >= n_features))):
            raise ValueError(f"a split node's feature lies outside the {n_features} columns of X.")
        self.feature = np.ascontiguousarray(np.where(split, feature, -1))
        self.threshold = np.ascontiguousarray(columns["threshold"], dtype=np.float64)
        self.missing_left = np.ascontiguousarray(columns["missing_left"], dtype=np.bool_)
        # Categorical splits (issue 53): absent fields (an older node layout) mean none.
        self.is_categorical = np.ascontiguousarray(
            np.concatenate([_field(part, "is_categorical", (), np.bool_) for part in parts])
            if parts
            else np.empty(0, dtype=np.bool_)
        )
        self.bitsets = np.ascontiguousarray(
            np.concatenate([_field(part, "left_categories", (4,), np.uint64) for part in parts])
            if parts
            else np.empty((0, 4), dtype=np.uint64)
        )
        self.is_categorical &= ~self.is_leaf
        self.left = np.ascontiguousarray(np.where(split, local_left + offsets, -1))
        self.right = np.ascontiguousarray(np.where(split, local_right + offsets, -1))
        self.cover = np.ascontiguousarray(columns["cover"], dtype=np.float64)
        # alpha_t times each leaf's value: the leaf's term of H(x).
        self.alphas = alphas
        self.value = np.ascontiguousarray(
            np.where(self.is_leaf, columns["value"], 0.0), dtype=np.float64
        )
        self.scaled = np.ascontiguousarray(np.repeat(alphas, sizes) * self.value)
        if not np.all(np.isfinite(self.scaled)):
            raise ValueError("leaf values must be finite.")
        depth, order, n_ordered = _walk_structure(
            self.roots, sizes, self.left, self.right, self.is_leaf
        )
        if np.any(depth < 0):
            raise ValueError("a node array is not a tree: a node is reached twice.")
        self.max_depth = int(depth.max()) if depth.size else 0
        self.order, self.n_ordered = order, n_ordered
        # The one feature of each learner's splits, or _SEVERAL, or _CONSTANT (no split).
        big = np.iinfo(np.int64).max
        if self.n_learners:
            low = np.minimum.reduceat(np.where(split, feature, big), self.roots)
            high = np.maximum.reduceat(np.where(split, feature, -1), self.roots)
            self.one_feature = np.where(low == big, _CONSTANT, np.where(low == high, low, _SEVERAL))
        else:
            self.one_feature = np.empty(0, dtype=np.int64)
        self.one_feature = np.ascontiguousarray(self.one_feature, dtype=np.int64)

    def reached_covers(self) -> np.ndarray:
        """The covers of the nodes reachable from the roots (an unreachable node may hold
        anything)."""
        return self.cover[self.order]

    def cover_shares(self) -> tuple[np.ndarray, np.ndarray]:
        """Each split's shares of its left and right children: the children's covers over their
        sum (one half each where both are 0); 0 at leaves."""
        split = ~self.is_leaf
        share_left = np.zeros(self.cover.size)
        share_right = np.zeros(self.cover.size)
        cover_left = self.cover[self.left[split]]
        cover_right = self.cover[self.right[split]]
        total = cover_left + cover_right
        positive = total > 0
        share_left[split] = np.where(positive, cover_left / np.where(positive, total, 1.0), 0.5)
        share_right[split] = np.where(positive, cover_right / np.where(positive, total, 1.0), 0.5)
        return share_left, share_right

    def node_means(self, share_left: np.ndarray, share_right: np.ndarray) -> np.ndarray:
        """Each node's mean of the leaf values below it under the shares (``alpha_t`` not
        applied)."""
        return _node_means(
            self.order, self.is_leaf, self.left, self.right, self.value, share_left, share_right
        )


@numba.njit(cache=True)
def _node_means(order, is_leaf, left, right, value, share_left, share_right):  # pragma: no cover
    """Share-weighted means of the leaf values below each node, children before parents (the
    reverse of the depth-first preorder)."""
    means = np.zeros(value.shape[0])
    for k in range(order.shape[0] - 1, -1, -1):
        node = order[k]
        if is_leaf[node]:
            means[node] = value[node]
        else:
            means[node] = (
                share_left[node] * means[left[node]] + share_right[node] * means[right[node]]
            )
    return means


@numba.njit(cache=True)
def _leaf_of(
    x, node, feature, threshold, missing_left, is_cat, bits, left, right, is_leaf
):  # pragma: no cover
    """The leaf that the row ``x`` reaches from ``node``."""
    while not is_leaf[node]:
        goes = goes_left_raw(
            x[feature[node]], threshold[node], missing_left[node], is_cat[node], bits[node]
        )
        node = left[node] if goes else right[node]
    return node


# --- Path-dependent TreeSHAP (Algorithm 2) -------------------------------------------------------
# The path of unique features m lives in four arrays (feature, zero fraction, one fraction,
# permutation weight) from index ``base``; ``depth`` is the index of its last element.


@numba.njit(cache=True)
def _extend(pf, pz, po, pw, parent, base, depth, zero, one, feature, inv):  # pragma: no cover
    """Write at ``base`` the path at ``parent`` (elements ``0 .. depth - 1``) extended by the
    element (feature, zero, one): the copy and the extension in one pass (``inv[k] = 1 / k``)."""
    for i in range(depth):
        pf[base + i] = pf[parent + i]
        pz[base + i] = pz[parent + i]
        po[base + i] = po[parent + i]
    pf[base + depth] = feature
    pz[base + depth] = zero
    po[base + depth] = one
    if depth == 0:
        pw[base] = 1.0
        return
    scale = inv[depth + 1]
    pw[base + depth] = one * pw[parent + depth - 1] * depth * scale
    for i in range(depth - 1, 0, -1):
        pw[base + i] = (zero * pw[parent + i] * (depth - i) + one * pw[parent + i - 1] * i) * scale
    pw[base] = zero * pw[parent] * depth * scale


@numba.njit(cache=True)
def _unwind(pf, pz, po, pw, base, depth, index, inv):  # pragma: no cover - compiled
    """Remove element ``index`` from the path ending at ``depth``."""
    one = po[base + index]
    zero = pz[base + index]
    next_one = pw[base + depth]
    if one != 0.0:
        scale = (depth + 1) / one
        for i in range(depth - 1, -1, -1):
            held = pw[base + i]
            pw[base + i] = next_one * scale * inv[i + 1]
            next_one = held - pw[base + i] * zero * (depth - i) * inv[depth + 1]
    else:
        scale = (depth + 1) / zero
        for i in range(depth - 1, -1, -1):
            pw[base + i] = pw[base + i] * scale * inv[depth - i]
    for i in range(index, depth):
        pf[base + i] = pf[base + i + 1]
        pz[base + i] = pz[base + i + 1]
        po[base + i] = po[base + i + 1]


@numba.njit(cache=True)
def _unwound_sum_hot(pz, po, pw, base, depth, index, inv):  # pragma: no cover - compiled
    """The total permutation weight of the path without element ``index`` (one fraction not
    0)."""
    zero = pz[base + index]
    scale = 1.0 / po[base + index]
    next_one = pw[base + depth]
    total = 0.0
    for i in range(depth - 1, -1, -1):
        share = next_one * scale * inv[i + 1]
        total += share
        next_one = pw[base + i] - share * zero * (depth - i)
    return total * (depth + 1)


@numba.njit(cache=True)
def _cold_sum(pw, base, depth, inv):  # pragma: no cover - compiled
    """``sum_i pw[i] / (depth - i)``: times ``(depth + 1) / zero``, the total permutation weight
    of the path without an element of one fraction 0 and zero fraction ``zero``."""
    total = 0.0
    for i in range(depth - 1, -1, -1):
        total += pw[base + i] * inv[depth - i]
    return total * (depth + 1)


@threaded_kernel(cache=True)
def _path_dependent_kernel(  # pragma: no cover - compiled
    X,
    roots,
    one_feature,
    root_means,
    feature,
    threshold,
    missing_left,
    is_cat,
    bits,
    left,
    right,
    is_leaf,
    scaled,
    share_left,
    share_right,
    max_depth,
    block,
):
    """Path-dependent SHAP values of ``sum_t scaled-leaf_t(x)`` for each row of ``X``.

    Algorithm 2 of Lundberg et al. (shap's ``tree_shap_recursive``) with an explicit stack: a
    frame is a node, the start of its parent's path, its ``unique_depth`` and the fractions and
    feature to extend the path with. The hot child (the side ``x`` takes) is taken first. A
    child whose zero and one fractions are both 0 carries no weight and is skipped (its terms
    are all zero).
    """
    n, d = X.shape
    n_learners = roots.shape[0]
    out = np.zeros((n, d))
    path_size = (max_depth + 2) * (max_depth + 3) // 2 + 1
    stack_size = max_depth + 3
    inv = np.zeros(max_depth + 3)
    for k in range(1, max_depth + 3):
        inv[k] = 1.0 / k
    n_blocks = (n + block - 1) // block
    for c in numba.prange(n_blocks):
        pf = np.empty(path_size, dtype=np.int64)
        pz = np.empty(path_size)
        po = np.empty(path_size)
        pw = np.empty(path_size)
        s_node = np.empty(stack_size, dtype=np.int64)
        s_parent = np.empty(stack_size, dtype=np.int64)
        s_depth = np.empty(stack_size, dtype=np.int64)
        s_zero = np.empty(stack_size)
        s_one = np.empty(stack_size)
        s_feature = np.empty(stack_size, dtype=np.int64)
        for i in range(c * block, min(n, (c + 1) * block)):
            x = X[i]
            phi = out[i]
            for t in range(n_learners):
                only = one_feature[t]
                if only == -2:
                    continue
                if only >= 0:
                    leaf = _leaf_of(
                        x,
                        roots[t],
                        feature,
                        threshold,
                        missing_left,
                        is_cat,
                        bits,
                        left,
                        right,
                        is_leaf,
                    )
                    phi[only] += scaled[leaf] - root_means[t]
                    continue
                s_node[0], s_parent[0], s_depth[0] = roots[t], 0, 0
                s_zero[0], s_one[0], s_feature[0] = 1.0, 1.0, -1
                top = 1
                while top > 0:
                    top -= 1
                    node, parent, depth = s_node[top], s_parent[top], s_depth[top]
                    base = parent + depth + 1
                    _extend(
                        pf, pz, po, pw, parent, base, depth, s_zero[top], s_one[top],
                        s_feature[top], inv,
                    )  # fmt: skip
                    if is_leaf[node]:
                        value = scaled[node]
                        cold = np.nan  # the cold elements' sum, shared (computed once)
                        for k in range(1, depth + 1):
                            one, zero = po[base + k], pz[base + k]
                            if one != 0.0:
                                w = _unwound_sum_hot(pz, po, pw, base, depth, k, inv)
                            else:
                                if cold != cold:
                                    cold = _cold_sum(pw, base, depth, inv)
                                w = cold / zero
                            phi[pf[base + k]] += w * (one - zero) * value
                        continue
                    f = feature[node]
                    v = x[f]
                    goes_left = goes_left_raw(
                        v, threshold[node], missing_left[node], is_cat[node], bits[node]
                    )
                    if goes_left:
                        hot, cold = left[node], right[node]
                        hot_share, cold_share = share_left[node], share_right[node]
                    else:
                        hot, cold = right[node], left[node]
                        hot_share, cold_share = share_right[node], share_left[node]
                    incoming_zero, incoming_one = 1.0, 1.0
                    index = 1
                    while index <= depth and pf[base + index] != f:
                        index += 1
                    if index <= depth:  # already split on f: undo that split, redo it here
                        incoming_zero, incoming_one = pz[base + index], po[base + index]
                        _unwind(pf, pz, po, pw, base, depth, index, inv)
                        depth -= 1
                    cold_zero = cold_share * incoming_zero
                    if cold_zero != 0.0:
                        s_node[top], s_parent[top], s_depth[top] = cold, base, depth + 1
                        s_zero[top], s_one[top], s_feature[top] = cold_zero, 0.0, f
                        top += 1
                    hot_zero = hot_share * incoming_zero
                    if hot_zero != 0.0 or incoming_one != 0.0:
                        s_node[top], s_parent[top], s_depth[top] = hot, base, depth + 1
                        s_zero[top], s_one[top], s_feature[top] = hot_zero, incoming_one, f
                        top += 1
    return out


# --- Interventional TreeSHAP (Independent TreeSHAP) ----------------------------------------------


@threaded_kernel(cache=True)
def _leaf_means_kernel(  # pragma: no cover - compiled
    B, weights, roots, feature, threshold, missing_left, is_cat, bits, left, right, is_leaf, value
):
    """The weighted mean ``sum_b weights[b] * value[leaf_t(b)] / sum_b weights[b]`` per learner,
    the rows added in order (dividing last: a learner that sends every row to one leaf gets
    exactly that leaf's value)."""
    n_learners = roots.shape[0]
    out = np.zeros(n_learners)
    for t in numba.prange(n_learners):
        total = 0.0
        weight = 0.0
        for b in range(B.shape[0]):
            if weights[b] != 0.0:
                leaf = _leaf_of(
                    B[b],
                    roots[t],
                    feature,
                    threshold,
                    missing_left,
                    is_cat,
                    bits,
                    left,
                    right,
                    is_leaf,
                )
                total += weights[b] * value[leaf]
                weight += weights[b]
        out[t] = total / weight
    return out


@threaded_kernel(cache=True)
def _interventional_kernel(  # pragma: no cover - compiled
    X,
    B,
    weights,
    roots,
    one_feature,
    root_means,
    feature,
    threshold,
    missing_left,
    is_cat,
    bits,
    left,
    right,
    is_leaf,
    scaled,
    coefficients,
    max_depth,
    block,
):
    """Interventional SHAP values of ``sum_t scaled-leaf_t(x)`` against the rows of ``B``
    (``weights`` summing to one), for each row of ``X``.

    For a pair ``(x, b)`` the walk follows both rows; where they part at a split on a feature
    ``f`` not yet assigned, the walk goes on along ``x``'s side with ``f`` in ``A`` and a frame
    is pushed for ``b``'s side with ``f`` in ``B``. An assigned feature follows its row. The
    path holds the assigned features in order; a popped frame cuts it back to its length.
    ``coefficients[a, b] = (a-1)! b! / (a+b)!``.
    """
    n, d = X.shape
    n_background = B.shape[0]
    n_learners = roots.shape[0]
    out = np.zeros((n, d))
    size = max_depth + 2
    n_blocks = (n + block - 1) // block
    for c in numba.prange(n_blocks):
        s_node = np.empty(size, dtype=np.int64)
        s_length = np.empty(size, dtype=np.int64)
        s_feature = np.empty(size, dtype=np.int64)
        p_feature = np.empty(size, dtype=np.int64)
        p_side = np.empty(size, dtype=np.int8)
        assigned = np.zeros(d, dtype=np.int8)  # 0: free, 1: from x (A), 2: from b (B)
        for i in range(c * block, min(n, (c + 1) * block)):
            x = X[i]
            phi = out[i]
            for t in range(n_learners):
                only = one_feature[t]
                if only == -2:
                    continue
                if only >= 0:
                    leaf = _leaf_of(
                        x,
                        roots[t],
                        feature,
                        threshold,
                        missing_left,
                        is_cat,
                        bits,
                        left,
                        right,
                        is_leaf,
                    )
                    phi[only] += scaled[leaf] - root_means[t]
                    continue
                for r in range(n_background):
                    w = weights[r]
                    if w == 0.0:
                        continue
                    b_row = B[r]
                    s_node[0], s_length[0], s_feature[0] = roots[t], 0, -1
                    top = 1
                    length = 0
                    while top > 0:
                        top -= 1
                        node = s_node[top]
                        while length > s_length[top]:
                            length -= 1
                            assigned[p_feature[length]] = 0
                        if s_feature[top] >= 0:
                            p_feature[length] = s_feature[top]
                            p_side[length] = 2
                            assigned[s_feature[top]] = 2
                            length += 1
                        while not is_leaf[node]:
                            f = feature[node]
                            side = assigned[f]
                            if side != 2:
                                v = x[f]
                                x_left = goes_left_raw(
                                    v, threshold[node], missing_left[node], is_cat[node],
                                    bits[node],
                                )  # fmt: skip
                                if side == 1:
                                    node = left[node] if x_left else right[node]
                                    continue
                            u = b_row[f]
                            b_left = goes_left_raw(
                                u, threshold[node], missing_left[node], is_cat[node], bits[node]
                            )
                            if side == 2:
                                node = left[node] if b_left else right[node]
                                continue
                            if x_left == b_left:
                                node = left[node] if x_left else right[node]
                                continue
                            # x and b part here: b's side later (f from b), x's side now.
                            s_node[top] = right[node] if x_left else left[node]
                            s_length[top], s_feature[top] = length, f
                            top += 1
                            p_feature[length] = f
                            p_side[length] = 1
                            assigned[f] = 1
                            length += 1
                            node = left[node] if x_left else right[node]
                        if length == 0:
                            continue
                        n_a = 0
                        for k in range(length):
                            if p_side[k] == 1:
                                n_a += 1
                        n_b = length - n_a
                        value = w * scaled[node]
                        gain = value * coefficients[n_a, n_b] if n_a > 0 else 0.0
                        loss = value * coefficients[n_b, n_a] if n_b > 0 else 0.0
                        for k in range(length):
                            if p_side[k] == 1:
                                phi[p_feature[k]] += gain
                            else:
                                phi[p_feature[k]] -= loss
                    while length > 0:
                        length -= 1
                        assigned[p_feature[length]] = 0
    return out


def _shapley_coefficients(max_depth: int) -> np.ndarray:
    """``table[a, b] = (a-1)! b! / (a+b)! = 1 / (a * C(a+b, a))`` for ``a >= 1``: each
    feature's Shapley value in the game ``1[A in S and B out of S]``, ``|A| = a``, ``|B| = b``."""
    size = max_depth + 1
    table = np.zeros((size, size))
    for a in range(1, size):
        for b in range(size - a):
            table[a, b] = 1.0 / (a * math.comb(a + b, a))
    return table


# --- Public functions -----------------------------------------------------------------------------


def _rows(X: object, name: str) -> np.ndarray:
    rows = np.ascontiguousarray(X, dtype=np.float64)
    if rows.ndim != 2:
        raise ValueError(f"{name} must be 2-D, got an array of shape {rows.shape}.")
    return rows


def path_dependent_shap(
    node_arrays: Sequence[np.ndarray], alphas: Sequence[float] | np.ndarray, X: np.ndarray
) -> tuple[np.ndarray, float]:
    """Path-dependent TreeSHAP values of ``sum_t alphas[t] * h_t(x)``, weighted by the covers.

    Algorithm 2 of Lundberg, Erion and Lee (2018), as shap's
    ``TreeExplainer(feature_perturbation="tree_path_dependent")`` with the node covers as
    ``node_sample_weight`` and LightGBM's ``pred_contrib=True``: exact for the value function
    ``v(S) = E[h(x_S, .)]`` in which a split on a feature outside ``S`` sends weight to its
    children in proportion to their covers. No background data are needed.

    Parameters
    ----------
    node_arrays : sequence of ndarray
        One node array (:data:`~viboost.boosting.learners.NODE_DTYPE`, root first) per learner,
        with the ``cover`` of every node reachable from the root finite and nonnegative.
    alphas : array-like of shape (len(node_arrays),)
        The learners' weights.
    X : ndarray of shape (n_samples, n_features)
        Rows to explain (NaN: each split's ``missing_left`` side).

    Returns
    -------
    values : ndarray of shape (n_samples, n_features)
        The contribution of each feature.
    expected : float
        ``sum_t alphas[t] * E[h_t]``, the cover-weighted means of the leaf values; each row of
        ``values`` sums to ``H(x) - expected``.

    Raises
    ------
    ValueError
        If a reachable node's cover is NaN (not recorded), infinite or negative, or the node
        arrays do not describe trees on the columns of ``X``.

    Examples
    --------
    A stump on feature 1 whose left leaf saw 3 units of training weight and its right leaf 1:

    >>> import numpy as np
    >>> from viboost.boosting.stumps import DecisionStump
    >>> nodes = DecisionStump(1, 0.0, 1, False, covers=(3.0, 1.0)).nodes
    >>> values, expected = path_dependent_shap([nodes], [2.0], np.array([[9.0, 1.0]]))
    >>> values, expected  # E[h] = 2 * (3 * -1 + 1 * 1) / 4 = -1, and H(x) = 2
    (array([[0., 3.]]), -1.0)
    """
    X = _rows(X, "X")
    ensemble = _Ensemble(node_arrays, alphas, X.shape[1])
    covers = ensemble.reached_covers()
    if np.any(np.isnan(covers)):
        raise ValueError(
            "a node's cover is NaN: the learner was not recorded with covers, so path-dependent "
            "values cannot be computed; use interventional_shap with a background."
        )
    if np.any(~np.isfinite(covers) | (covers < 0)):
        raise ValueError("node covers must be finite and nonnegative.")
    share_left, share_right = ensemble.cover_shares()
    means = ensemble.node_means(share_left, share_right)
    # alpha_t E[h_t], alpha_t applied last (a leaf of share 1 gives exactly its scaled value).
    root_means = np.ascontiguousarray(ensemble.alphas * means[ensemble.roots])
    values = _path_dependent_kernel(
        X,
        ensemble.roots,
        ensemble.one_feature,
        root_means,
        ensemble.feature,
        ensemble.threshold,
        ensemble.missing_left,
        ensemble.is_categorical,
        ensemble.bitsets,
        ensemble.left,
        ensemble.right,
        ensemble.is_leaf,
        ensemble.scaled,
        share_left,
        share_right,
        ensemble.max_depth,
        _BLOCK_ROWS,
    )
    return values, float(root_means.sum())


def interventional_shap(
    node_arrays: Sequence[np.ndarray],
    alphas: Sequence[float] | np.ndarray,
    X: np.ndarray,
    background: np.ndarray,
    weights: np.ndarray | None = None,
) -> tuple[np.ndarray, float]:
    """Interventional TreeSHAP values of ``sum_t alphas[t] * h_t(x)`` against a background.

    Exact Shapley values of ``v(S) = sum_b w_b H(x_S, b_{not S}) / sum_b w_b`` over every row
    of ``background`` (Independent TreeSHAP, as shap's ``TreeExplainer(model, data=background,
    feature_perturbation="interventional")`` given all of the rows). The covers are not used.

    Parameters
    ----------
    node_arrays : sequence of ndarray
        One node array (:data:`~viboost.boosting.learners.NODE_DTYPE`) per learner.
    alphas : array-like of shape (len(node_arrays),)
        The learners' weights.
    X : ndarray of shape (n_samples, n_features)
        Rows to explain (NaN: each split's ``missing_left`` side, here as in the background).
    background : ndarray of shape (n_background, n_features)
        Background rows.
    weights : ndarray of shape (n_background,), default=None
        Nonnegative weights of the background rows with a positive sum; uniform when ``None``.

    Returns
    -------
    values : ndarray of shape (n_samples, n_features)
        The contribution of each feature.
    expected : float
        The weighted mean of ``H`` over the background; each row of ``values`` sums to
        ``H(x) - expected``.

    Examples
    --------
    ``h(x) = +1`` when both features are positive, else -1 (a tree of depth 2):

    >>> import numpy as np
    >>> from viboost.boosting.learners import NODE_DTYPE
    >>> nodes = np.zeros(5, dtype=NODE_DTYPE)
    >>> nodes[["feature", "threshold", "left", "right"]] = [
    ...     (0, 0.0, 1, 2), (-1, 0, -1, -1), (1, 0.0, 3, 4), (-1, 0, -1, -1), (-1, 0, -1, -1)]
    >>> nodes["is_leaf"] = [False, True, False, True, True]
    >>> nodes["value"] = [0.0, -1.0, 0.0, -1.0, 1.0]
    >>> values, expected = interventional_shap([nodes], [1.0], np.array([[1.0, 1.0]]),
    ...                                        background=np.array([[-1.0, -1.0]]))
    >>> values, expected  # the two features share the jump from -1 to +1
    (array([[1., 1.]]), -1.0)
    """
    X = _rows(X, "X")
    background = _rows(background, "background")
    if background.shape[1] != X.shape[1]:
        raise ValueError(
            f"X has {X.shape[1]} columns but background has {background.shape[1]}; they must match."
        )
    if background.shape[0] == 0:
        raise ValueError("background must hold at least one row.")
    if weights is None:
        weights = np.ones(background.shape[0])
    weights = np.ascontiguousarray(weights, dtype=np.float64)
    if weights.shape != (background.shape[0],):
        raise ValueError(
            f"weights have shape {weights.shape}; expected ({background.shape[0]},), one per "
            "background row."
        )
    if not np.all(np.isfinite(weights)) or np.any(weights < 0) or weights.sum() <= 0:
        raise ValueError("weights must be finite and nonnegative with a positive sum.")
    ensemble = _Ensemble(node_arrays, alphas, X.shape[1])
    arrays = (
        ensemble.feature,
        ensemble.threshold,
        ensemble.missing_left,
        ensemble.is_categorical,
        ensemble.bitsets,
        ensemble.left,
        ensemble.right,
        ensemble.is_leaf,
        ensemble.scaled,
    )
    root_means = ensemble.alphas * _leaf_means_kernel(
        background, weights, ensemble.roots, *arrays[:-1], ensemble.value
    )
    values = _interventional_kernel(
        X,
        background,
        weights / weights.sum(),
        ensemble.roots,
        ensemble.one_feature,
        root_means,
        *arrays,
        _shapley_coefficients(ensemble.max_depth),
        ensemble.max_depth,
        _BLOCK_ROWS,
    )
    return values, float(root_means.sum())


def path_dependent_tree_shap(nodes: np.ndarray, X: np.ndarray) -> tuple[np.ndarray, float]:
    """Path-dependent TreeSHAP values of one learner from its node array (weight 1).

    :func:`path_dependent_shap` of ``[nodes]`` with ``alphas = [1]``.

    Parameters
    ----------
    nodes : ndarray
        The learner's node array (:data:`~viboost.boosting.learners.NODE_DTYPE`) with covers.
    X : ndarray of shape (n_samples, n_features)
        Rows to explain.

    Returns
    -------
    values : ndarray of shape (n_samples, n_features)
    expected : float
        The cover-weighted mean of the leaf values.

    Examples
    --------
    >>> import numpy as np
    >>> from viboost.boosting.stumps import DecisionStump
    >>> nodes = DecisionStump(0, 0.5, -1, True, covers=(1.0, 1.0)).nodes
    >>> path_dependent_tree_shap(nodes, np.array([[0.0], [np.nan]]))
    (array([[ 1.],
           [-1.]]), 0.0)
    """
    return path_dependent_shap([nodes], [1.0], X)


def interventional_tree_shap(
    nodes: np.ndarray, X: np.ndarray, background: np.ndarray, weights: np.ndarray | None = None
) -> tuple[np.ndarray, float]:
    """Interventional TreeSHAP values of one learner against a weighted background (weight 1).

    :func:`interventional_shap` of ``[nodes]`` with ``alphas = [1]``: the exact Shapley values
    of ``h`` at the rows of ``X`` and ``E[h]`` over the background, each row of the values
    summing to ``h(x) - E[h]`` (what a learner's ``contributions`` method returns).

    Parameters
    ----------
    nodes : ndarray
        The learner's node array (:data:`~viboost.boosting.learners.NODE_DTYPE`).
    X : ndarray of shape (n_samples, n_features)
        Rows to explain.
    background : ndarray of shape (n_background, n_features)
        Background rows.
    weights : ndarray of shape (n_background,), default=None
        Their nonnegative weights; uniform when ``None``.

    Returns
    -------
    values : ndarray of shape (n_samples, n_features)
    expected : float
        The weighted mean of ``h`` over the background.

    Examples
    --------
    >>> import numpy as np
    >>> from viboost.boosting.stumps import DecisionStump
    >>> nodes = DecisionStump(0, 0.5, 1, False).nodes
    >>> background = np.array([[0.0], [1.0], [2.0], [3.0]])
    >>> interventional_tree_shap(nodes, np.array([[1.0]]), background, np.array([1, 1, 1, 5]))
    (array([[0.25]]), 0.75)
    """
    return interventional_shap([nodes], [1.0], X, background, weights)
