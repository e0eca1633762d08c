"""Best-first growth of histogram trees from node histograms, wherever the rows are.

:class:`~viboost.boosting.tree_search.TreeSearch` grows a tree over rows in this process. The
growth itself needs of the rows only one thing: the histogram of a node's rows (per feature and
bin, two sums of the round's per-row statistics and the row count:
:class:`~viboost.boosting.split_statistics.TreeSettings`). This module holds the growth; the
rows answer its requests where they are (in memory:
:class:`~viboost.boosting.partition.RowPartition`; on Dask: the blocks, each with a partition
of its rows, whose histograms the client adds).

:class:`TreeGrowths` is the growth of one or more trees as a state machine over histograms:
given the roots' histograms, it says which nodes each tree needs split next
(:meth:`TreeGrowths.requests`, lists of :class:`Expansion`), takes the histograms of their
smaller children (:meth:`TreeGrowths.expanded`; the larger child's is its parent's minus the
smaller's, the subtraction trick) and in the end gives the trees (:meth:`TreeGrowths.tree`).
It finds splits with the same compiled kernel
(:func:`~viboost.boosting.splitting.best_node_split`) and in the same order as a growth of
one tree alone (best gain first, ties to the node created first), so on the same histograms
each tree is the same, node for node. Its bookkeeping is compiled and runs for every tree
in one call a step: the trees of a cross-fit's folds, or of the K classes of a round, grow
in lockstep without a Python loop over their nodes. A compiled caller that holds the rows can
run the whole growth in one call from :attr:`TreeGrowths.state` with :func:`advance_growths`,
:func:`pending_requests` and :func:`attach_children`
(:func:`~viboost.boosting.partition.grow_in_place`). :class:`TreeGrowth` is the growth of one
tree (a :class:`TreeGrowths` of one).

With ``speculate=m`` (an int) a request also splits, besides the node the growth needs now, the
``m - 1`` nodes most likely to be split next, which is what a distributed fit needs when a round
trip to the workers costs far more than a histogram. Best-first growth splits a node only after
its parent, so it splits the nodes in the order of their *rank*, the smaller of their own gain
and their parent's rank, and a request takes the best-ranked nodes whose split is known and
whose children's histograms are not: leaves of the tree grown so far, and children of earlier
speculative splits that the growth has not made yet alike. A tree of depth ``d`` then costs
about ``d`` exchanges (each level needs its parent's histograms), however the levels interleave
in best-first order. ``speculate=True`` splits every node that could still be split before the
tree is full (the best ``max_leaf_nodes - leaves``). Either way the tree is the same: the
growth still splits the leaves in best-first order, and the histograms of the nodes it splits
are the same. A node split speculatively but never by the growth lies in a leaf of the final
tree, and each level of such splits below a leaf histograms at most half of its rows (the
smaller children). Measured on 100 trees of 31 leaves (10^6 rows, ``speculate=4``, the Dask
fit's): 11.3 exchanges and 35.8 splits a tree, where asking only for leaves of the tree grown
so far took 16.6 exchanges and 39.5 splits.

:func:`padded_thresholds` lays out the bin edges that the grown trees take their thresholds
from; :func:`~viboost.boosting.partition.grow` runs a growth against a function that answers
its requests.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import NamedTuple

import numba
import numpy as np

from viboost._utils.parallel import threaded_kernel
from viboost.boosting.learners import NODE_DTYPE
from viboost.boosting.split_statistics import TreeSettings
from viboost.boosting.splitting import best_node_split, leaf_value

__all__ = [
    "Expansion",
    "GrowthState",
    "TreeGrowth",
    "TreeGrowths",
    "advance_growths",
    "attach_children",
    "padded_thresholds",
    "pending_requests",
]


class Expansion(NamedTuple):
    """A request to split a node: its rows with ``bin < position`` of ``feature`` (and the
    missing ones if ``missing_left``; for a categorical split, ``position`` -1, the codes in
    ``categories``) become node ``left``, the others node ``right``; the
    histogram wanted is the left child's if ``small_left`` (the child of smaller count, so the
    one with fewer rows when every row counts 1)."""

    node: int
    left: int
    right: int
    feature: int
    position: int
    missing_left: bool
    small_left: bool
    #: A categorical split (``position`` -1): the four uint64 words of the codes that go left
    #: (bit ``k`` of word ``k // 64``); None for a numeric split.
    categories: tuple[int, int, int, int] | None = None


class GrowthState(NamedTuple):
    """The compiled state and settings of a :class:`TreeGrowths` that :func:`advance_growths`
    and :func:`attach_children` take, for a compiled caller that answers the growth's requests
    itself (:func:`~viboost.boosting.partition.grow_in_place`, whose compiled growth takes
    them first, in this order); the arrays are the growth's own."""

    ints: np.ndarray
    reals: np.ndarray
    counts: np.ndarray
    pending: np.ndarray
    max_leaf_nodes: int
    max_depth: int
    min_leaf: float
    n_bins: np.ndarray
    is_categorical: np.ndarray
    categorical: np.ndarray
    code: int
    priors: np.ndarray


# Columns of the compiled growth's per-node integer state (TreeGrowths._ints[t, node]).
_DEPTH, _FEATURE, _POSITION, _MISSING_LEFT, _LEFT, _RIGHT, _ORDER, _IN_HEAP, _GROWN = range(9)
# ... then the four words of a categorical split's left set (uint64 bit patterns; position -1).
_BITS = 9
_N_INTS = 13
# ... and of its float state (TreeGrowths._reals[t, node]): the node's three sums, the gain of
# its best split (-inf: none, or it may not split) and the left child's three sums.
_SUMS, _GAIN, _LEFT_SUMS = 0, 3, 4
_N_REALS = 7
# Columns of a tree's counters (TreeGrowths._counts[t]).
_RECORDS, _LEAVES, _CREATED, _PENDING = range(4)
# Columns of a pending request (TreeGrowths._pending[t, k]): Expansion's fields in order,
# the categories' four words last.
_N_REQUEST = 11


@numba.njit(cache=True)
def _heap_top(ints, reals, counts, t):  # pragma: no cover - compiled
    """The best candidate of tree ``t`` (-1: none): the highest gain, ties to
    the node created first (the order of a heap of ``(-gain, order)``)."""
    best = -1
    for i in range(counts[t, _RECORDS]):
        if ints[t, i, _IN_HEAP] == 0:
            continue
        if best < 0:
            best = i
            continue
        gain, best_gain = reals[t, i, _GAIN], reals[t, best, _GAIN]
        if gain > best_gain or (gain == best_gain and ints[t, i, _ORDER] < ints[t, best, _ORDER]):
            best = i
    return best


@numba.njit(cache=True)
def _admit(ints, reals, counts, t, i):  # pragma: no cover - compiled
    """Node ``i`` joins tree ``t`` (the in-memory search creates it here): a candidate if it
    has a split of finite gain."""
    ints[t, i, _ORDER] = counts[t, _CREATED]
    counts[t, _CREATED] += 1
    if math.isfinite(reals[t, i, _GAIN]):
        ints[t, i, _IN_HEAP] = 1


@numba.njit(cache=True)
def _new_record(ints, reals, counts, t, depth, a, b, c):  # pragma: no cover - compiled
    """A new node of tree ``t`` (depth and sums; no split yet); returns its id."""
    i = counts[t, _RECORDS]
    if i >= ints.shape[1]:
        raise RuntimeError("a tree grew more nodes than its capacity")
    counts[t, _RECORDS] = i + 1
    ints[t, i, :] = 0
    ints[t, i, _DEPTH] = depth
    ints[t, i, _LEFT] = -1
    ints[t, i, _RIGHT] = -1
    ints[t, i, _ORDER] = -1
    reals[t, i, :] = 0.0
    reals[t, i, _SUMS] = a
    reals[t, i, _SUMS + 1] = b
    reals[t, i, _SUMS + 2] = c
    reals[t, i, _GAIN] = -np.inf
    return i


@numba.njit(cache=True)
def _needs_histograms(
    ints, reals, counts, t, i, max_leaf_nodes, max_depth, min_leaf
):  # pragma: no cover - compiled
    """Whether splitting leaf ``i`` needs its children's histograms: for their own splits,
    unless it is the tree's last split or neither child may split (depth, rows); their sums
    then come from the leaf's split, and the leaf's rows stay unpartitioned."""
    if counts[t, _LEAVES] + 1 >= max_leaf_nodes:
        return False
    left_count = reals[t, i, _LEFT_SUMS + 2]
    right_count = reals[t, i, _SUMS + 2] - left_count
    return ints[t, i, _DEPTH] + 1 < max_depth and max(left_count, right_count) >= 2 * min_leaf


@numba.njit(cache=True)
def _request(ints, reals, counts, pending, t, i, n_out):  # pragma: no cover - compiled
    """Tree ``t``'s request number ``n_out`` (into ``pending``): split node ``i`` by its best
    split, its children to be the next two records after the earlier requests'. Returns the
    number of requests."""
    left_count = reals[t, i, _LEFT_SUMS + 2]
    left = counts[t, _RECORDS] + 2 * n_out
    request = pending[t, n_out]
    request[0] = i
    request[1] = left
    request[2] = left + 1
    request[3] = ints[t, i, _FEATURE]
    request[4] = ints[t, i, _POSITION]
    request[5] = ints[t, i, _MISSING_LEFT]
    request[6] = left_count <= reals[t, i, _SUMS + 2] - left_count
    for w in range(4):
        request[7 + w] = ints[t, i, _BITS + w]
    return n_out + 1


@numba.njit(cache=True)
def _speculate(
    ints, reals, counts, pending, t, first, n_out, max_leaf_nodes, max_depth, min_leaf,
    per_request, rank, parent,
):  # pragma: no cover - compiled  # fmt: skip
    """Tree ``t``'s speculative requests after the one for node ``first``: the leaves most
    likely to be split next that still need their children's histograms, up to
    ``per_request`` requests in all. Returns the number of requests.

    Best-first growth splits a node only after its parent, so the nodes are split in the
    order of their *rank*, the smaller of their own gain and their parent's rank (the leaves
    of the grown tree rank by their gain; the children of a speculative split that the growth
    has not made yet, by at most their parent's): the tree's next ``max_leaf_nodes - leaves``
    splits are the best-ranked nodes not yet split. So the candidates are every node without
    children whose split is known, below a grown node or below a speculative split alike,
    and a speculative split not yet made by the growth holds a place among them. (A request
    then need not wait for the growth to reach the leaf: a chain of nodes each better than
    the others costs a trip per node either way, but the rest of the tree grows beside it.)
    ``rank`` and ``parent`` are scratch arrays of at least the tree's records."""
    n_records = counts[t, _RECORDS]
    capacity = ints.shape[1]
    parent[:n_records] = -1
    for i in range(n_records):
        if ints[t, i, _LEFT] >= 0:
            parent[ints[t, i, _LEFT]] = i
            parent[ints[t, i, _RIGHT]] = i
    # Ranks, parents before children (a record's children come after it); -inf: not a
    # candidate (split by the growth, or no split of finite gain).
    for i in range(n_records):
        rank[i] = -np.inf
        if ints[t, i, _GROWN] != 0 or not math.isfinite(reals[t, i, _GAIN]):
            continue
        p = parent[i]
        if p < 0 or ints[t, p, _GROWN] != 0:
            if ints[t, i, _IN_HEAP] != 0:
                rank[i] = reals[t, i, _GAIN]
        elif math.isfinite(rank[p]):
            rank[i] = min(reals[t, i, _GAIN], rank[p])
    rank[first] = -np.inf  # (asked for already)
    # Splits the tree may still make, less the one asked for: a node ranked lower than that
    # many others can never be split.
    room = max_leaf_nodes - counts[t, _LEAVES] - 1
    # Room for the records of every split the growth may still need after these requests.
    spare = capacity - n_records - 2 * max(max_leaf_nodes - counts[t, _LEAVES], 0)
    for _ in range(room):
        if n_out >= per_request or 2 * (n_out + 1) > spare:
            break
        best = -1
        for i in range(n_records):
            if rank[i] > -np.inf and (best < 0 or rank[i] > rank[best]):
                best = i
        if best < 0:
            break
        rank[best] = -np.inf
        if ints[t, best, _LEFT] >= 0 or not _needs_histograms(
            ints, reals, counts, t, best, max_leaf_nodes, max_depth, min_leaf
        ):
            continue
        n_out = _request(ints, reals, counts, pending, t, best, n_out)
    return n_out


@numba.njit(cache=True)
def advance_growths(
    ints, reals, counts, pending, max_leaf_nodes, max_depth, min_leaf, per_request, requests
):  # pragma: no cover - compiled
    """Per tree: split the best leaves, in order, while their children are known (or need no
    histograms: then made from the split's sums, with no split of their own); then, with
    ``requests``, the nodes to split next into ``pending``: the leaf the growth splits next,
    and, with ``per_request`` > 1, the best-ranked others (:func:`_speculate`). Returns per
    tree whether it is grown."""
    n_trees, capacity = ints.shape[0], ints.shape[1]
    done = np.zeros(n_trees, dtype=np.bool_)
    rank = np.empty(capacity)
    parent = np.empty(capacity, dtype=np.int64)
    for t in range(n_trees):
        while counts[t, _LEAVES] < max_leaf_nodes:
            i = _heap_top(ints, reals, counts, t)
            if i < 0:
                break
            if ints[t, i, _LEFT] < 0:
                if _needs_histograms(
                    ints, reals, counts, t, i, max_leaf_nodes, max_depth, min_leaf
                ):
                    break
                depth = ints[t, i, _DEPTH] + 1
                la = reals[t, i, _LEFT_SUMS]
                lb = reals[t, i, _LEFT_SUMS + 1]
                lc = reals[t, i, _LEFT_SUMS + 2]
                left = _new_record(ints, reals, counts, t, depth, la, lb, lc)
                right = _new_record(
                    ints, reals, counts, t, depth, reals[t, i, _SUMS] - la,
                    reals[t, i, _SUMS + 1] - lb, reals[t, i, _SUMS + 2] - lc,
                )  # fmt: skip
                ints[t, i, _LEFT] = left
                ints[t, i, _RIGHT] = right
            ints[t, i, _IN_HEAP] = 0
            ints[t, i, _GROWN] = 1
            _admit(ints, reals, counts, t, ints[t, i, _LEFT])
            _admit(ints, reals, counts, t, ints[t, i, _RIGHT])
            counts[t, _LEAVES] += 1
        full = counts[t, _LEAVES] >= max_leaf_nodes
        done[t] = full or _heap_top(ints, reals, counts, t) < 0
        if not requests or done[t]:
            continue
        # The leaf that the growth splits next (the best one; it needs its children's
        # histograms, else it would have been split above) ...
        i = _heap_top(ints, reals, counts, t)
        n_out = _request(ints, reals, counts, pending, t, i, 0)
        if per_request > 1:
            n_out = _speculate(
                ints, reals, counts, pending, t, i, n_out, max_leaf_nodes, max_depth, min_leaf,
                per_request, rank, parent,
            )  # fmt: skip
        counts[t, _PENDING] = n_out
    return done


@numba.njit(cache=True)
def pending_requests(counts, pending):  # pragma: no cover - compiled
    """Every tree's pending requests (of :func:`advance_growths`), flat over the trees in
    order: per request its tree, the node to split, its children's ids (left, right), the
    split's feature, position and whether the missing values go left, whether the left child
    is the smaller, and a categorical split's four words of the codes that go left (uint64;
    zeros for a numeric split)."""
    m = 0
    for t in range(counts.shape[0]):
        m += counts[t, _PENDING]
    tree = np.empty(m, dtype=np.int64)
    node = np.empty(m, dtype=np.int64)
    left = np.empty(m, dtype=np.int64)
    right = np.empty(m, dtype=np.int64)
    feature = np.empty(m, dtype=np.int64)
    position = np.empty(m, dtype=np.int64)
    missing_left = np.empty(m, dtype=np.bool_)
    small_left = np.empty(m, dtype=np.bool_)
    words = np.zeros((m, 4), dtype=np.uint64)
    q = 0
    for t in range(counts.shape[0]):
        for k in range(counts[t, _PENDING]):
            request = pending[t, k]
            tree[q] = t
            node[q] = request[0]
            left[q] = request[1]
            right[q] = request[2]
            feature[q] = request[3]
            position[q] = request[4]
            missing_left[q] = request[5] != 0
            small_left[q] = request[6] != 0
            for w in range(4):
                words[q, w] = np.uint64(request[7 + w])
            q += 1
    return tree, node, left, right, feature, position, missing_left, small_left, words


@numba.njit(cache=True)
def _find_split(
    ints, reals, t, i, hist, n_bins, is_cat, cat, code, prior, min_leaf, max_depth
):  # pragma: no cover - compiled
    """Node ``i`` of tree ``t``'s best split from its histogram ``hist``, if it may split
    (depth and row limits; else its gain stays -inf). (numba's cache of this function holds
    the compiled ``best_node_split``: a change there needs a change here, or a cleared cache.)"""
    if ints[t, i, _DEPTH] < max_depth and reals[t, i, _SUMS + 2] >= 2 * min_leaf:
        gain, j, p, m, la, lb, lc, w0, w1, w2, w3 = best_node_split(
            hist, n_bins, is_cat, code, prior, min_leaf, cat
        )
        ints[t, i, _BITS] = w0
        ints[t, i, _BITS + 1] = w1
        ints[t, i, _BITS + 2] = w2
        ints[t, i, _BITS + 3] = w3
        reals[t, i, _GAIN] = gain
        ints[t, i, _FEATURE] = j
        ints[t, i, _POSITION] = p
        ints[t, i, _MISSING_LEFT] = m
        reals[t, i, _LEFT_SUMS] = la
        reals[t, i, _LEFT_SUMS + 1] = lb
        reals[t, i, _LEFT_SUMS + 2] = lc


@numba.njit(cache=True)
def _start_growths(
    ints, reals, counts, roots, sums, n_bins, is_cat, cat, code, priors, min_leaf, max_depth
):  # pragma: no cover - compiled
    """Each tree's root (sums ``sums[t]``) with its best split from its histogram
    ``roots[t]``; the root is the tree's one leaf. (One thread: a step's few roots are not
    worth a parallel form and its compilation.)"""
    for t in range(roots.shape[0]):
        i = _new_record(ints, reals, counts, t, 0, sums[t, 0], sums[t, 1], sums[t, 2])
        _find_split(
            ints, reals, t, i, roots[t], n_bins, is_cat, cat, code, priors[t], min_leaf, max_depth
        )
        _admit(ints, reals, counts, t, i)
        counts[t, _LEAVES] = 1


@threaded_kernel(cache=True)
def attach_children(
    ints, reals, counts, pending, children, n_bins, is_cat, cat, code, priors, min_leaf,
    max_depth,
):  # pragma: no cover - compiled  # fmt: skip
    """The children of every tree's pending requests (flat over the trees, in order; ``m`` of
    them): request ``q``'s smaller child's histogram is ``children[q]``, its larger one's
    ``children[m + q]``. Each tree records its children (left, right per request) with their
    sums; then their best splits are found in one parallel loop (each child writes its own
    record)."""
    n_children = children.shape[0]
    n_requests = n_children // 2
    # Every child's sums from its feature 0 (each row has one bin of every feature): per child
    # the slots added in order from the first, as ``hist[0].sum(axis=0)`` adds them.
    sums = np.empty((n_children, 3))
    for c in range(n_children):
        for s in range(3):
            total = children[c, 0, 0, s]
            for slot in range(1, children.shape[2]):
                total += children[c, 0, slot, s]
            sums[c, s] = total
    tree_of = np.empty(n_children, dtype=np.int64)
    node_of = np.empty(n_children, dtype=np.int64)
    q = 0
    for t in range(ints.shape[0]):
        for k in range(counts[t, _PENDING]):
            request = pending[t, k]
            depth = ints[t, request[0], _DEPTH] + 1
            small_left = request[6] != 0
            for side in range(2):
                c = q if small_left == (side == 0) else n_requests + q
                i = _new_record(ints, reals, counts, t, depth, sums[c, 0], sums[c, 1], sums[c, 2])
                if i != request[1 + side]:
                    raise RuntimeError("histograms arrived out of order")
                tree_of[c] = t
                node_of[c] = i
            ints[t, request[0], _LEFT] = request[1]
            ints[t, request[0], _RIGHT] = request[2]
            q += 1
        counts[t, _PENDING] = 0
    for c in numba.prange(n_children):
        t = tree_of[c]
        _find_split(
            ints, reals, t, node_of[c], children[c], n_bins, is_cat, cat, code, priors[t],
            min_leaf, max_depth,
        )  # fmt: skip


@numba.njit(cache=True)
def _grown_tree(ints, reals, counts, t, code, prior, edges, nodes):  # pragma: no cover
    """Tree ``t`` as grown into ``nodes`` (:data:`~viboost.boosting.learners.NODE_DTYPE`, at
    least as long as the tree has records): its nodes depth-first, root first, a split's
    threshold from ``edges`` (:func:`padded_thresholds`), a leaf's value its provisional one
    (:func:`~viboost.boosting.splitting.leaf_value`). Returns the tree's node count, the
    weighted error of its leaves' signs (0 for the Newton score), and per node id the
    position in the tree of the node holding its rows (its own, or for a child of a split the
    tree did not make, that of the leaf it lies in)."""
    n_records = counts[t, _RECORDS]
    order = np.empty(n_records, dtype=np.int64)
    position_of = np.full(n_records, -1, dtype=np.int64)
    stack = np.empty(n_records + 1, dtype=np.int64)
    stack[0] = 0
    top = 1
    n = 0
    while top > 0:
        top -= 1
        index = stack[top]
        position_of[index] = n
        order[n] = index
        n += 1
        if ints[t, index, _GROWN] != 0:
            stack[top] = ints[t, index, _RIGHT]
            stack[top + 1] = ints[t, index, _LEFT]
            top += 2
    error = 0.0
    for k in range(n):
        index = order[k]
        a, b = reals[t, index, _SUMS], reals[t, index, _SUMS + 1]
        nodes[k].cover = reals[t, index, _SUMS + 2]
        if ints[t, index, _GROWN] != 0:
            feature, position = ints[t, index, _FEATURE], ints[t, index, _POSITION]
            nodes[k].value = 0.0
            nodes[k].feature = feature
            if position < 0:  # categorical: the set of codes that go left
                nodes[k].threshold = np.nan
                nodes[k].bin_threshold = -1
                nodes[k].is_categorical = True
                for w in range(4):
                    nodes[k].left_categories[w] = np.uint64(ints[t, index, _BITS + w])
            else:
                nodes[k].threshold = edges[feature, position - 1]
                nodes[k].bin_threshold = position - 1
            nodes[k].missing_left = ints[t, index, _MISSING_LEFT] != 0
            nodes[k].left = position_of[ints[t, index, _LEFT]]
            nodes[k].right = position_of[ints[t, index, _RIGHT]]
            nodes[k].is_leaf = False
            nodes[k].gain = reals[t, index, _GAIN]
        else:
            nodes[k].value = leaf_value(a, b, code, prior)
            nodes[k].feature = -1
            nodes[k].threshold = 0.0
            nodes[k].bin_threshold = 0
            nodes[k].missing_left = False
            nodes[k].left = -1
            nodes[k].right = -1
            nodes[k].is_leaf = True
            nodes[k].gain = 0.0
            if code != 0:
                error += min(a, b)
    holder = np.empty(n_records, dtype=np.int64)
    for index in range(n_records):  # a parent comes before its children
        if position_of[index] >= 0:
            holder[index] = position_of[index]
        left = ints[t, index, _LEFT]
        if left >= 0:
            holder[left] = holder[index]
            holder[ints[t, index, _RIGHT]] = holder[index]
    return n, error, holder


def padded_thresholds(
    thresholds: Sequence[np.ndarray] | np.ndarray, n_bins: np.ndarray
) -> np.ndarray:
    """Each feature's bin edges in one row, padded with +inf (a split above the last edge
    sends every observed value left), shape ``(n_features, width)``: what
    :class:`TreeGrowths` takes a split's threshold from (computed once per binning).

    Examples
    --------
    >>> padded_thresholds([np.array([0.5]), np.array([1.0, 2.0])], np.array([2, 3]))
    array([[0.5, inf, inf, inf],
           [1. , 2. , inf, inf]])
    """
    width = max([len(e) for e in thresholds] + [int(np.max(n_bins, initial=0))]) + 1
    out = np.full((len(thresholds), width), np.inf)
    for j, edges in enumerate(thresholds):
        out[j, : len(edges)] = edges
    return out


class TreeGrowths:
    """The best-first growth of several trees from node histograms (see the module
    docstring), their bookkeeping compiled: one call per step advances every tree and says
    which nodes each needs split next, one call records all their children.

    Each tree grows as it would alone: its splits in the same order (best gain first, ties to
    the node created first), found by the same kernel (``best_node_split``) on the same
    histograms, so node for node the tree of :class:`~viboost.boosting.tree_search.TreeSearch`.

    Parameters
    ----------
    roots : sequence of ndarray of shape (n_features, n_slots, 3), or stacked in one ndarray
        Each tree's root histogram: per feature and bin, the two statistics of
        :meth:`~viboost.boosting.split_statistics.TreeSettings.statistics` in the units of
        weights summing to one, and the rows' count (each row counted as its sample weight, as
        ``min_samples_leaf`` counts them).
    n_bins : ndarray of int64, shape (n_features,)
        Bins of observed values per feature (``FeatureBinner.n_bins_``).
    thresholds : sequence of ndarray or ndarray
        Per feature, the bin edges (``FeatureBinner.thresholds_``), or
        :func:`padded_thresholds` of them.
    settings : TreeSettings
    priors : sequence of float
        Per tree, :meth:`~viboost.boosting.split_statistics.TreeSettings.prior` of its
        round's weights.
    speculate : bool or int, default=False
        Which nodes a request splits: False (or 1) only the leaf the growth splits next; an
        int ``m`` also the ``m - 1`` best-ranked others (the module docstring); True every one
        that may still be split (about one exchange per level of the tree instead of one per
        node). The same trees whichever.
    is_categorical : ndarray of bool, shape (n_features,), default=None
        Which features are categorical (``FeatureBinner.is_categorical_``: bin == code), split
        by sets of codes (:func:`~viboost.boosting.splitting.best_node_split`); None: none.
    """

    def __init__(
        self,
        roots: Sequence[np.ndarray] | np.ndarray,
        n_bins: np.ndarray,
        thresholds: Sequence[np.ndarray] | np.ndarray,
        settings: TreeSettings,
        priors: Sequence[float],
        speculate: bool | int = False,
        is_categorical: np.ndarray | None = None,
    ) -> None:
        self.n_bins = np.ascontiguousarray(n_bins, dtype=np.int64)
        self.settings = settings
        n_features = self.n_bins.shape[0]
        self.is_categorical = (
            np.zeros(n_features, dtype=np.bool_)
            if is_categorical is None
            else np.ascontiguousarray(is_categorical, dtype=np.bool_)
        )
        if self.is_categorical.shape != (n_features,):
            raise ValueError(
                f"is_categorical must have one entry per feature ({n_features}), got "
                f"{self.is_categorical.shape}"
            )
        self._cat = settings.categorical
        self.priors = np.array(priors, dtype=np.float64).reshape(-1)
        n_trees = len(roots)
        if self.priors.shape != (n_trees,):
            raise ValueError(f"expected one prior per tree ({n_trees}), got {self.priors.size}")
        leaves = settings.max_leaf_nodes
        if isinstance(speculate, bool):
            self._per_request = leaves if speculate else 1
        elif isinstance(speculate, int | np.integer) and speculate >= 1:
            self._per_request = int(speculate)
        else:
            raise ValueError(f"speculate must be a bool or an int >= 1, got {speculate!r}")
        self.speculate = speculate
        self._code = settings.code
        self._min_leaf = max(1e-300, float(settings.min_samples_leaf))
        # (no limit: a depth no tree reaches)
        self._max_depth = 1 << 62 if settings.max_depth is None else int(settings.max_depth)
        # Nodes a tree can have: the root and two children a split, for at most
        # max_leaf_nodes - 1 splits of nodes of the final tree and the speculative ones (a
        # node split speculatively but never by the growth is a leaf of the final tree), which
        # _speculate keeps within the rest, always leaving room for the growth's own splits.
        capacity = 6 * leaves + 1
        self._ints = np.zeros((n_trees, capacity, _N_INTS), dtype=np.int64)
        self._reals = np.zeros((n_trees, capacity, _N_REALS))
        self._counts = np.zeros((n_trees, 4), dtype=np.int64)
        self._pending = np.zeros((n_trees, max(leaves, 1), _N_REQUEST), dtype=np.int64)
        self._asked: list[list[Expansion]] | None = None
        self._grown = False  # (once every tree is grown, nothing changes)
        # Per tree, the histogram of each node that may still be expanded (by id).
        self._hists: list[dict[int, np.ndarray]]
        # The roots' sums from their feature 0 (each row has one bin of every feature).
        sums = np.array([root[0].sum(axis=0) for root in roots]).reshape(n_trees, 3)
        stacked = roots if isinstance(roots, np.ndarray) else np.array(roots)
        if n_trees:
            _start_growths(
                self._ints, self._reals, self._counts, stacked, sums, self.n_bins,
                self.is_categorical, self._cat, self._code, self.priors, self._min_leaf,
                self._max_depth,
            )  # fmt: skip
        self._hists = [{0: root} for root in roots]
        # Each feature's edges in one padded row (given so, or padded here).
        if isinstance(thresholds, np.ndarray) and thresholds.ndim == 2:
            self._edges = np.ascontiguousarray(thresholds, dtype=np.float64)
        else:
            self._edges = padded_thresholds(thresholds, self.n_bins)
        self._positions: dict[int, np.ndarray] = {}

    def __len__(self) -> int:
        return self._ints.shape[0]

    @property
    def state(self) -> GrowthState:
        """The compiled state and settings (:class:`GrowthState`): a caller that advances the
        growth and attaches the children's histograms itself (one compiled call for the whole
        growth) takes them from here; :meth:`tree` reads the state it leaves."""
        return GrowthState(
            self._ints, self._reals, self._counts, self._pending, self.settings.max_leaf_nodes,
            self._max_depth, self._min_leaf, self.n_bins, self.is_categorical, self._cat,
            self._code, self.priors,
        )  # fmt: skip

    def _advance(self, requests: bool) -> np.ndarray:
        return advance_growths(
            self._ints, self._reals, self._counts, self._pending, self.settings.max_leaf_nodes,
            self._max_depth, self._min_leaf, self._per_request, requests,
        )  # fmt: skip

    @property
    def done(self) -> bool:
        """Whether every tree is grown."""
        if self._asked is not None:
            return False
        if not self._grown:
            self._grown = bool(np.all(self._advance(False)))
        return self._grown

    def requests(self) -> list[list[Expansion]]:
        """Per tree, the nodes to split next (none once it is grown); answer with
        :meth:`expanded`."""
        if self._asked is not None:
            raise RuntimeError("the previous requests have not been answered")
        self._advance(True)
        columns = pending_requests(self._counts, self._pending)
        out: list[list[Expansion]] = [[] for _ in range(len(self))]
        for t, node, left, right, feature, position, missing, small, words in zip(
            *(column.tolist() for column in columns), strict=True
        ):
            out[t].append(
                Expansion(
                    node, left, right, feature, position, missing, small,
                    None if position >= 0 else (words[0], words[1], words[2], words[3]),
                )
            )  # fmt: skip
        if any(out):
            self._asked = out
        return out

    def expanded(
        self,
        histograms: Sequence[Sequence[np.ndarray]] | None = None,
        children: np.ndarray | None = None,
    ) -> None:
        """Take the smaller children's histograms of the last :meth:`requests`: per tree in
        order (``histograms``), or, for ``m`` requests in all, already in ``children[:m]``
        (shape ``(2 m, n_features, n_slots, 3)``, in the requests' order over the trees:
        :func:`~viboost.boosting.partition.expand_together` with ``out``). The larger
        children's histograms, their parents' minus the smaller ones', go to ``children[m:]``
        (made when None)."""
        asked = self._asked if self._asked is not None else [[] for _ in range(len(self))]
        flat = [(t, e) for t, mine in enumerate(asked) for e in mine]
        n_requests = len(flat)
        if histograms is not None:
            if len(histograms) != len(self) or any(
                len(h) != len(a) for h, a in zip(histograms, asked, strict=True)
            ):
                raise ValueError(
                    f"expected {[len(a) for a in asked]} histograms per tree, got "
                    f"{[len(h) for h in histograms]}"
                )
        if n_requests == 0:
            self._asked = None
            return
        if children is None:
            if histograms is None:
                raise ValueError("give the histograms or the children")
            first = next(h for h in histograms if len(h))[0]
            children = np.empty((2 * n_requests, *first.shape))
            for q, small in enumerate(h for mine in histograms for h in mine):
                children[q] = small
        elif children.shape[0] != 2 * n_requests:
            raise ValueError(
                f"children must hold {2 * n_requests} histograms, got {children.shape}"
            )
        for q, (t, request) in enumerate(flat):
            small, large = children[q], children[n_requests + q]
            np.subtract(self._hists[t].pop(request.node), small, out=large)
            hists = self._hists[t]
            hists[request.left], hists[request.right] = (
                (small, large) if request.small_left else (large, small)
            )
        attach_children(
            self._ints, self._reals, self._counts, self._pending, children, self.n_bins,
            self.is_categorical, self._cat, self._code, self.priors, self._min_leaf,
            self._max_depth,
        )  # fmt: skip
        self._asked = None

    def tree(self, t: int) -> tuple[np.ndarray, float]:
        """Tree ``t``'s node arrays (:data:`~viboost.boosting.learners.NODE_DTYPE`,
        depth-first, root first; a :class:`~viboost.boosting.trees.HistogramTree` with the
        settings' ``leaf_weights``) and the weighted error of its leaves' signs (0 for the
        Newton score)."""
        if not self.done:
            raise RuntimeError("the tree is not grown yet")
        nodes = np.zeros(self._counts[t, _RECORDS], dtype=NODE_DTYPE)
        n, error, self._positions[t] = _grown_tree(
            self._ints, self._reals, self._counts, t, self._code, self.priors[t], self._edges,
            nodes,
        )  # fmt: skip
        return nodes[:n].copy(), float(error)

    def node_positions(self, t: int) -> np.ndarray:
        """Per node of tree ``t``'s growth (by id), the position in the grown tree of the node
        that holds its rows: its own, or, for a child of a speculative split that the tree did
        not make, that of the leaf it lies in."""
        if t not in self._positions:
            self.tree(t)
        return self._positions[t]


class TreeGrowth:
    """The best-first growth of one tree from node histograms (see the module docstring): a
    :class:`TreeGrowths` of one tree.

    Parameters
    ----------
    root : ndarray of shape (n_features, n_slots, 3)
        The root's histogram (:class:`TreeGrowths`).
    n_bins : ndarray of int64, shape (n_features,)
        Bins of observed values per feature (``FeatureBinner.n_bins_``).
    thresholds : sequence of ndarray
        Per feature, the bin edges (``FeatureBinner.thresholds_``).
    settings : TreeSettings
    prior : float
        :meth:`~viboost.boosting.split_statistics.TreeSettings.prior` of the round's weights.
    speculate : bool or int, default=False
        As in :class:`TreeGrowths`.
    is_categorical : ndarray of bool, shape (n_features,), default=None
        As in :class:`TreeGrowths`.
    """

    def __init__(
        self,
        root: np.ndarray,
        n_bins: np.ndarray,
        thresholds: Sequence[np.ndarray],
        settings: TreeSettings,
        prior: float,
        speculate: bool | int = False,
        is_categorical: np.ndarray | None = None,
    ) -> None:
        self._growths = TreeGrowths(
            [root], n_bins, thresholds, settings, [prior], speculate, is_categorical
        )
        self.settings = settings
        self.prior = float(prior)
        self.speculate = speculate

    @property
    def done(self) -> bool:
        """Whether the tree is grown."""
        return self._growths.done

    def requests(self) -> list[Expansion]:
        """The nodes to split next (empty once the tree is grown); answer with
        :meth:`expanded`."""
        return self._growths.requests()[0]

    def expanded(self, histograms: Sequence[np.ndarray]) -> None:
        """The histograms of the smaller children of the last :meth:`requests`, in order."""
        self._growths.expanded([histograms])

    def tree(self) -> tuple[np.ndarray, float]:
        """The grown tree's node arrays and the weighted error of its leaves' signs
        (:meth:`TreeGrowths.tree`)."""
        return self._growths.tree(0)

    def node_positions(self) -> np.ndarray:
        """:meth:`TreeGrowths.node_positions` of the tree."""
        return self._growths.node_positions(0)
