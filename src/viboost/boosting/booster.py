"""The booster: Algorithm 1's outer loop over one binning of the rows.

A :class:`Booster` fits one or more ensembles that share a binning (one for a plain fit or the
refit of a cross-fitted one, one per fold while cross-fitting, stepped in lockstep as LightGBM's
``cv`` steps its fold boosters). :meth:`Booster.add_round` is one round of Algorithm 1 for each
of its ensembles:

1. **search**: the base learner of least weighted error under the weights
   ``s_n phi_n exp(-tau y_n H(x_n))`` (the approximate mode, section 5 eq. (17), S.6) or
   ``s_n phi_n sigmoid(-y_n H(x_n))`` (one Newton step towards the exact mode);
2. **round**: :func:`viboost.variational.run_round`, the inner variational loop, on the rows of
   positive multiplicity or their pseudo-rows (:mod:`viboost.variational.compression`);
3. **reweight**: ``H += learning_rate * alpha_t h_t`` and the next round's search weights;
4. **record**: the learner, alpha_t, the ELBO trace, the iterations and the noise statistics
   (:class:`BoosterRecords`).

Steps 1 and 3, and the rows of step 2, belong to the *row source* (:class:`RowSource`), the one
place that knows where the rows are: :class:`InMemoryRows` holds them in this process
(:class:`~viboost.boosting.reweighting.RowMargins` and a
:class:`~viboost.boosting.learners.LearnerSearch`), and
:class:`viboost.dask.engine.BlockRows` keeps them in blocks on a Dask cluster and supplies
block-reduced histograms and knot moments. The booster itself holds the variational state and
the records, so both paths run the same loop.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Protocol

import numba
import numpy as np
from tqdm.auto import tqdm

from viboost.boosting.learners import BaseLearner, LearnerSearch
from viboost.boosting.reweighting import RowMargins, ScaledWeights
from viboost.boosting.stumps import DecisionStump
from viboost.boosting.tree_search import TreeSearch
from viboost.boosting.trees import HistogramTree
from viboost.variational import (
    ModelPriors,
    RoundResult,
    RoundRows,
    RoundSettings,
    VariationalState,
    run_round,
)
from viboost.variational.compression import COMPRESS_ABOVE
from viboost.variational.state import CleanLogOdds

__all__ = [
    "Booster",
    "BoosterRecords",
    "InMemoryRows",
    "RowSource",
    "average_records",
    "run_rounds",
]


class RowSource(Protocol):
    """The rows that the ensembles of a :class:`Booster` fit: one binning, and per ensemble its
    multiplicities (zero for rows it does not fit) and its margins ``H``."""

    def start(self, cleans: Sequence[CleanLogOdds], tau: float, logistic: bool) -> None:
        """Set the search weights of the first round under each ensemble's q(w)."""
        ...

    @property
    def fits_intercept(self) -> bool:
        """Whether the first round is the intercept ``c_0`` (trees with per-leaf weights)."""
        ...

    def best(self, intercept: bool = False) -> list[BaseLearner]:
        """Each ensemble's learner of least weighted error under its current weights (the
        one-leaf tree of the intercept when ``intercept``)."""
        ...

    def round_rows(
        self, learners: Sequence[BaseLearner]
    ) -> tuple[list[RoundRows], list[BaseLearner]]:
        """Each ensemble's rows of the round for its learner (weighted rows or pseudo-rows; by
        leaf for per-leaf weights), and the learners with their training covers recorded."""
        ...

    def add(
        self,
        learners: Sequence[BaseLearner],
        alphas: Sequence[float],
        cleans: Sequence[CleanLogOdds],
    ) -> None:
        """``H += alpha h`` with the round's final learners (the learners of the last
        :meth:`round_rows`, with their leaf values set for per-leaf weights), and the next
        round's search weights under each ensemble's q(w)."""
        ...

    def margins(self, k: int = 0) -> np.ndarray:
        """Ensemble ``k``'s margins ``H`` of every row."""
        ...

    def out_of_fold(self) -> np.ndarray:
        """Per row, the margin of the last ensemble that holds it out (its validation rows),
        0 for rows no ensemble holds out."""
        ...


@dataclass
class BoosterRecords:
    """What one ensemble recorded, round by round."""

    learners: list[BaseLearner] = field(default_factory=list)
    alphas: list[float] = field(default_factory=list)
    elbo: list[np.ndarray] = field(default_factory=list)
    n_iter: list[int] = field(default_factory=list)
    snr_path: list[float] = field(default_factory=list)
    noise_grade_path: list[float] = field(default_factory=list)

    def append(self, learner: BaseLearner, alpha: float, result: RoundResult) -> None:
        """Record a round: its learner, its (shrunk) weight and the round's result."""
        self.learners.append(learner)
        self.alphas.append(alpha)
        self.elbo.append(result.elbo_trace)
        self.n_iter.append(result.n_iter)
        self.snr_path.append(result.state.snr)
        self.noise_grade_path.append(result.state.noise_grade)

    def __len__(self) -> int:
        return len(self.learners)


def average_records(records: Sequence[BoosterRecords], n_groups: int) -> list[BoosterRecords]:
    """The records of the average of ``n_groups`` groups of ensembles, as one ensemble per
    member of a group.

    ``records`` holds the groups one after the other, each of the same number of ensembles (1,
    or one per class), all of the same number of rounds. The average of the groups' margins is
    one ensemble of all their learners, each weight divided by ``n_groups``; its rounds are
    interleaved, round ``t`` of every group before round ``t + 1`` of any, so that after every
    ``n_groups`` rounds the margins are the average of the groups' after that many.

    Examples
    --------
    >>> first = BoosterRecords(learners=["a0", "a1"], alphas=[1.0, 0.5])
    >>> second = BoosterRecords(learners=["b0", "b1"], alphas=[1.0, 0.25])
    >>> (average,) = average_records([first, second], 2)
    >>> average.learners, average.alphas
    (['a0', 'b0', 'a1', 'b1'], [0.5, 0.5, 0.25, 0.125])
    """
    if n_groups < 1 or len(records) % n_groups:
        raise ValueError(f"{len(records)} ensembles do not make {n_groups} equal groups")
    per_group = len(records) // n_groups
    groups = [records[g * per_group : (g + 1) * per_group] for g in range(n_groups)]
    n_rounds = len(records[0])
    if any(len(r) != n_rounds for r in records):
        raise ValueError("the ensembles to average have different numbers of rounds")
    averaged = []
    for member in range(per_group):
        these = [group[member] for group in groups]
        out = BoosterRecords()
        for t in range(n_rounds):
            for r in these:
                out.learners.append(r.learners[t])
                out.alphas.append(r.alphas[t] / n_groups)
                for name in ("elbo", "n_iter", "snr_path", "noise_grade_path"):
                    values = getattr(r, name)
                    if values:
                        getattr(out, name).append(values[t])
        averaged.append(out)
    return averaged


class Booster:
    """Ensembles fitted by Algorithm 1 over one :class:`RowSource`, one round at a time.

    Parameters
    ----------
    rows : RowSource
        The rows, with one set of multiplicities and margins per ensemble.
    states : sequence of VariationalState
        Each ensemble's state before its next round.
    priors : ModelPriors
    settings : RoundSettings
        How every round runs (shared by the ensembles).
    learning_rate : float
        Shrinkage: a round adds ``learning_rate * alpha_t h_t`` to ``H``.
    records : sequence of BoosterRecords, default=None
        Rounds already fitted (a warm start); empty records when None.

    Examples
    --------
    >>> import numpy as np
    >>> from viboost.boosting.stumps import BinnedStumpSearch
    >>> from viboost.variational import ModelPriors, RoundSettings, initial_state
    >>> rng = np.random.default_rng(0)
    >>> X = rng.normal(size=(200, 2))
    >>> y = np.where(X[:, 0] > 0, 1.0, -1.0)
    >>> s = np.ones(200)
    >>> priors = ModelPriors()
    >>> state = initial_state(y, s, 1.0, (1.0, 1.0), priors)
    >>> rows = InMemoryRows([BinnedStumpSearch(X)], y, [s])
    >>> booster = Booster(rows, [state], priors, RoundSettings(), learning_rate=1.0)
    >>> booster.add_round()
    >>> booster.records[0].learners[0].feature, bool(np.mean(np.sign(rows.margins()) == y) > 0.9)
    (0, True)
    """

    def __init__(
        self,
        rows: RowSource,
        states: Sequence[VariationalState],
        priors: ModelPriors,
        settings: RoundSettings,
        learning_rate: float,
        records: Sequence[BoosterRecords] | None = None,
    ) -> None:
        self.rows = rows
        self.states = list(states)
        self.priors = priors
        self.settings = settings
        self.learning_rate = float(learning_rate)
        self.records = list(records) if records is not None else [BoosterRecords() for _ in states]
        # The exact mode ranks learners by logistic-loss weights (the estimator's docstring).
        rows.start(self._cleans(), float(settings.tau), settings.exact_mode)

    def _cleans(self) -> list[CleanLogOdds]:
        return [state.clean for state in self.states]

    @property
    def n_rounds(self) -> int:
        """Rounds fitted so far (those of the first ensemble)."""
        return len(self.records[0])

    def add_round(self) -> None:
        """One round of Algorithm 1 for every ensemble (see the module docstring)."""
        # h_t = argmax_h |mode of q(c)| (Algorithm 1), ranked without a mode search per learner:
        # the approximate mode (section 5 eq. (17)) is monotone in the weighted error under
        # s phi exp(-tau y H) (S.6); for "exact", one Newton step from c = 0 on the exact
        # log-density, whose g''(0) is the same for every h, ranks by the error under
        # s phi sigmoid(-y H).
        # Trees with per-leaf weights start with the intercept c_0: a one-leaf tree, its own
        # v-Log posterior over all rows, added unshrunk.
        intercept = self.n_rounds == 0 and self.rows.fits_intercept
        round_rows, learners = self.rows.round_rows(self.rows.best(intercept))
        rate = 1.0 if intercept else self.learning_rate
        alphas, final = [], []
        for k, (learner, rows) in enumerate(zip(learners, round_rows, strict=True)):
            result = run_round(rows, self.states[k], self.priors, self.settings)
            if rows.per_leaf:
                # Each leaf's value is the mode of its posterior; the tree's alpha_t is the
                # shrinkage: H += learning_rate * c_leaf(x).
                assert isinstance(learner, HistogramTree), "per-leaf weights are a tree's"
                learner = learner.with_leaf_values(np.asarray(result.alpha))
                alpha = rate
            else:
                # Shrinkage: H += learning_rate * alpha_t h_t (exactly alpha_t at rate 1).
                alpha_t = result.alpha
                assert not isinstance(alpha_t, np.ndarray), "one alpha_t without per-leaf weights"
                alpha = rate * alpha_t
            self.states[k] = result.state
            self.records[k].append(learner, alpha, result)
            alphas.append(alpha)
            final.append(learner)
        self.rows.add(final, alphas, self._cleans())

    def margins(self, k: int = 0) -> np.ndarray:
        """Ensemble ``k``'s margins ``H`` of every row."""
        return self.rows.margins(k)

    def out_of_fold(self) -> np.ndarray:
        """The out-of-fold margins (:meth:`RowSource.out_of_fold`)."""
        return self.rows.out_of_fold()


def run_rounds(booster: Booster, n_rounds: int, desc: str, verbose: int, done: int = 0) -> None:
    """Add rounds until ``booster`` has ``n_rounds``, with a progress bar on stderr when
    ``verbose`` and the fit lasts over two seconds (``done`` rounds were fitted before)."""
    with tqdm(
        total=n_rounds,
        initial=done,
        desc=desc,
        unit="round",
        disable=not verbose,
        delay=2.0,
        file=sys.stderr,
    ) as progress:
        for _ in range(done, n_rounds):
            booster.add_round()
            progress.update()


class InMemoryRows:
    """The row source of a fit in this process: the rows binned once, and per ensemble its
    multiplicities, its margins (:class:`~viboost.boosting.reweighting.RowMargins`) and its
    search (the fit's search restricted to the rows it fits).

    Parameters
    ----------
    searches : sequence of LearnerSearch
        Per ensemble, the search over its rows (all over the same rows and binning).
    y : ndarray of shape (n_samples,)
        Labels in {-1, +1}.
    multiplicities : sequence of ndarray of shape (n_samples,)
        Per ensemble, the row weights it fits (zero for rows it does not fit).
    margins : sequence of ndarray or None, default=None
        Per ensemble, the margins ``H`` to start from (a warm start); zeros when None.
    validation : ndarray of bool, shape (n_ensembles, n_samples), default=None
        Per ensemble, its held-out rows (:meth:`out_of_fold`).
    labels : sequence of ndarray, default=None
        Per ensemble, its labels in {-1, +1} when they differ from ``y`` (the one-against-rest
        labels of each class of a K-class fit, :mod:`viboost.boosting.softmax`).
    """

    def __init__(
        self,
        searches: Sequence[LearnerSearch],
        y: np.ndarray,
        multiplicities: Sequence[np.ndarray],
        margins: Sequence[np.ndarray] | None = None,
        validation: np.ndarray | None = None,
        labels: Sequence[np.ndarray] | None = None,
    ) -> None:
        n_rows = y.shape[0]
        self.searches = list(searches)
        self.y = y
        self._labels = None if labels is None else list(labels)
        if margins is None:
            margins = [np.zeros(n_rows) for _ in multiplicities]
        if labels is None:
            labels = [y] * len(multiplicities)
        self._margins = [
            RowMargins(y_k, m, margin)
            for y_k, m, margin in zip(labels, multiplicities, margins, strict=True)
        ]
        # Above COMPRESS_ABOVE weighted rows a round runs on pseudo-rows.
        self._compress = [int(np.count_nonzero(m > 0)) > COMPRESS_ABOVE for m in multiplicities]
        self.validation = validation
        # None between an add without reweighting and the next start.
        self._weights: list[ScaledWeights] | None = []
        self._outputs: list[np.ndarray | None] = []
        self._leaves: list[np.ndarray | None] = []

    @property
    def fits_intercept(self) -> bool:
        return bool(getattr(self.searches[0], "fits_intercept", False))

    def start(self, cleans: Sequence[CleanLogOdds], tau: float, logistic: bool) -> None:
        self.tau, self.logistic = tau, logistic
        self._weights = [
            margins.scaled_weights(clean, tau, logistic)
            for margins, clean in zip(self._margins, cleans, strict=True)
        ]

    def best(self, intercept: bool = False) -> list[BaseLearner]:
        if intercept:
            return [_tree_search(search).intercept() for search in self.searches]
        assert self._weights is not None, "start() sets the search weights"
        weights: list[np.ndarray] = []
        margins: list[np.ndarray | None] = []
        totals: list[float] = []
        for search, margins_k, scaled in zip(
            self.searches, self._margins, self._weights, strict=True
        ):
            weights.append(scaled.normalized())
            if getattr(search, "per_leaf", False):
                # The weights' sum before normalisation puts the prior in their units.
                with np.errstate(over="ignore"):
                    totals.append(scaled.total * float(np.exp(scaled.log_scale)))
                margins.append(margins_k.margin)
            else:
                totals.append(1.0)
                margins.append(None)
        # Searches that grow their learners together (the folds' trees, in one pass per step).
        kind = type(self.searches[0])
        together = getattr(kind, "best_together", None)
        labels = self.y if self._labels is None else self._labels
        if together is not None and all(type(s) is kind for s in self.searches):
            found = together(self.searches, weights, labels, margins, totals)
            return [learner for learner, _ in found]
        out = []
        for k, (search, w, margin, total) in enumerate(
            zip(self.searches, weights, margins, totals, strict=True)
        ):
            y = self._margins[k].y
            if margin is None:
                out.append(search.best(w, y)[0])
            else:
                out.append(_tree_search(search).best(w, y, margin, total)[0])
        return out

    def round_rows(
        self, learners: Sequence[BaseLearner]
    ) -> tuple[list[RoundRows], list[BaseLearner]]:
        out, covered = [], []
        self._outputs, self._leaves = [], []
        for search, learner, margins, compress in zip(
            self.searches, learners, self._margins, self._compress, strict=True
        ):
            y, margin, weight = margins.y, margins.margin, margins.sample_weight
            leaf: np.ndarray | None
            h: np.ndarray | None
            if getattr(learner, "per_leaf", False):
                assert isinstance(learner, HistogramTree), "per-leaf weights are a tree's"
                leaf = _tree_search(search).leaf_index(learner)
                n_leaves = learner.n_leaves
                if compress:
                    rows = RoundRows.pseudo(
                        y, None, margin, weight, margins.knot_range, leaf, n_leaves
                    )
                else:
                    rows = RoundRows.weighted(y, None, margin, weight, leaf, n_leaves)
                h = None
            else:
                h = search.outputs(learner)
                leaf = search.leaf_index(learner) if hasattr(search, "leaf_index") else None
                if compress:
                    rows = RoundRows.pseudo(y, h, margin, weight, margins.knot_range)
                else:
                    rows = RoundRows.weighted(y, h, margin, weight)
            out.append(rows)
            if self.validation is None:
                covered.append(
                    _with_training_covers(learner, leaf, h, weight, margins.total_weight)
                )
            else:  # cross-fitted boosters: only their margins are kept, never their learners
                covered.append(learner)
            self._outputs.append(h)
            self._leaves.append(leaf)
        return out, covered

    def add(
        self,
        learners: Sequence[BaseLearner],
        alphas: Sequence[float],
        cleans: Sequence[CleanLogOdds],
        reweight: bool = True,
    ) -> None:
        """The round's ``alpha h`` added to each ensemble, and the next round's weights; with
        ``reweight=False`` the margins only (the caller resets them and calls :meth:`start`,
        as :class:`~viboost.boosting.softmax.SoftmaxRows` does)."""
        weights = []
        for margins, learner, alpha, h, leaf, clean in zip(
            self._margins, learners, alphas, self._outputs, self._leaves, cleans, strict=True
        ):
            values = learner.leaf_values if h is None else h  # per-leaf: by each row's leaf
            if not reweight:
                margins.move(alpha, values, leaf if h is None else None)
            elif h is None:
                step = margins.add(alpha, values, clean, self.tau, self.logistic, False, leaf)
                weights.append(step)
            else:
                weights.append(margins.add(alpha, h, clean, self.tau, self.logistic))
        self._weights = weights if reweight else None
        self._outputs, self._leaves = [], []  # the round's, used: free them

    def margins(self, k: int = 0) -> np.ndarray:
        return self._margins[k].margin

    def shared_margins(self, ensembles: Sequence[int]) -> np.ndarray:
        """The margins ``H`` of ``ensembles`` as the rows of one array, shape
        ``(len(ensembles), n_samples)``, which they use from now on (a caller may write them
        in place, then say so with :meth:`margins_written`)."""
        shared = np.empty((len(ensembles), self.y.shape[0]))
        for row, k in zip(shared, ensembles, strict=True):
            row[:] = self._margins[k].margin
            self._margins[k].margin = row
        return shared

    def margins_written(self, k: int, largest: float) -> None:
        """Ensemble ``k``'s margins ``H`` (the array :meth:`margins` returns) were written in
        place, their largest absolute value ``largest`` (the search weights follow at the next
        :meth:`start`)."""
        self._margins[k].written(largest)

    def out_of_fold(self) -> np.ndarray:
        out = np.zeros(self.y.shape[0])
        if self.validation is not None:
            for margins, held_out in zip(self._margins, self.validation, strict=True):
                out[held_out] = margins.margin[held_out]
        return out


def _with_training_covers(
    learner: BaseLearner,
    leaf: np.ndarray | None,
    h: np.ndarray | None,
    weight: np.ndarray,
    total: float,
) -> BaseLearner:
    """``learner`` with the training weight that reached each of its nodes recorded (the
    ``cover`` of :data:`~viboost.boosting.learners.NODE_DTYPE`): from each row's leaf, or, for a
    stump, from its outputs in {-1, +1} (``sum w h`` is the right leaf's weight minus the left's
    for polarity +1; the left leaf is ``-polarity``). ``total`` is ``weight.sum()``."""
    if leaf is None:
        assert isinstance(learner, DecisionStump), "a learner without leaf indices is a stump"
        difference = _signed_sum(weight, h) * learner.polarity  # right minus left
        right = 0.5 * (total + difference)
        return learner.with_covers(np.array([total - right, right]))
    assert isinstance(learner, HistogramTree), "a learner with leaf indices is a tree"
    return learner.with_covers(np.bincount(leaf, weights=weight, minlength=learner.n_leaves))


def _tree_search(search: LearnerSearch) -> TreeSearch:
    """``search`` as the tree search it is where only trees go (the intercept, per-leaf
    weights)."""
    assert isinstance(search, TreeSearch), f"{type(search).__name__} grows no trees"
    return search


@numba.njit(cache=True)
def _signed_sum(weight, h):  # pragma: no cover - compiled
    """``sum_n weight_n h_n`` in one serial pass (not BLAS: its threads would spin beside the
    kernels' own after the call)."""
    total = 0.0
    for i in range(weight.shape[0]):
        total += weight[i] * h[i]
    return total
