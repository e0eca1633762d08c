"""Bundled data, synthetic data sets and helpers for experiments with label noise.

- :func:`load_spambase`: the UCI Spambase data (4,601 e-mails, 57 numeric features), the paper's
  *spam* data set, read from the package without any network access;
- :func:`load_reuters_acq_crude`: 70 Reuters-21578 stories (acq vs crude) as a binary bag of
  words, bundled, a stand-in for the paper's *state* data set (not publicly distributed);
- :func:`make_step`: the synthetic *step* data set of section 7 (type prior, noise grade);
- :func:`make_long_servedio`: the *Long-Servedio* data set, the supplement's Matlab generator;
- :func:`flip_labels`: corrupt an exact share of binary labels, chosen uniformly at random, as in
  the label-noise experiments of section 7;
- :func:`flip_labels_class_conditional`: flip each label independently with a probability that
  depends on its class (the binary asymmetric channel of supplement S.2).
"""

from __future__ import annotations

import gzip
from importlib.resources import files

import numpy as np
import pandas as pd
from numpy.typing import ArrayLike
from sklearn.utils import Bunch

from viboost._utils.validation import RandomStateLike, check_probability, check_random_state

from ._reuters import load_reuters_acq_crude
from ._synthetic import make_long_servedio, make_step

__all__ = [
    "flip_labels",
    "flip_labels_class_conditional",
    "load_reuters_acq_crude",
    "load_spambase",
    "make_long_servedio",
    "make_step",
]

_SPAMBASE_FILE = "spambase.csv.gz"
_SPAMBASE_TARGET = "spam"

_SPAMBASE_DESCR = """\
.. _spambase_dataset:

Spambase data set
-----------------

**Data Set Characteristics:**

:Number of Instances: 4,601 (1,813 spam = 39.4%, 2,788 non-spam)
:Number of Attributes: 57 numeric, continuous features and the binary target
:Attribute Information:
    - 48 ``word_freq`` features (``make``, ``address``, ..., ``conference``): percentage of the
      words in the e-mail that match the word (the names ``num3d``, ``num000``, ... stand for
      the words "3d", "000", ...);
    - 6 ``char_freq`` features (``charSemicolon``, ``charRoundbracket``, ``charSquarebracket``,
      ``charExclamation``, ``charDollar``, ``charHash``): percentage of characters that match;
    - ``capitalAve``, ``capitalLong``, ``capitalTotal``: average length, longest length and total
      number of uninterrupted runs of capital letters;
    - target ``spam``: 1 = spam (unsolicited commercial e-mail), 0 = not spam.
:Missing Attribute Values: None

This is the *spam* data set of section 7 of "A Bayesian Boosting Model" (Lorbert, Blei, Schapire,
Ramadge), where each run trains on a random 10% of the rows and tests on the other 90%. The
paper's "With 6,401 examples" is a slip for 4,601: the UCI data set has 4,601 rows.

The copy bundled here is the ``spam`` data set of the R package kernlab, which is UCI Spambase.

.. rubric:: Citation and licence

Hopkins, M., Reeber, E., Forman, G., Suermondt, J. (1999). Spambase. UCI Machine Learning
Repository. https://doi.org/10.24432/C53G6X. Licensed under Creative Commons Attribution 4.0
International (CC BY 4.0).
"""


def _read_spambase() -> pd.DataFrame:
    resource = files(__name__).joinpath("data", _SPAMBASE_FILE)
    with resource.open("rb") as raw, gzip.open(raw, "rt", encoding="utf-8") as text:
        frame = pd.read_csv(text)
    if _SPAMBASE_TARGET not in frame.columns:
        raise RuntimeError(f"bundled {_SPAMBASE_FILE} has no {_SPAMBASE_TARGET!r} column")
    target = frame[_SPAMBASE_TARGET]
    if pd.api.types.is_numeric_dtype(target):
        codes = target.astype(np.int64)
    else:  # a "spam" / "nonspam" spelling of the labels
        codes = target.astype(str).str.strip().str.lower().map({"spam": 1, "nonspam": 0})
        if codes.isna().any():
            raise RuntimeError(f"bundled {_SPAMBASE_FILE} has unexpected target values")
        codes = codes.astype(np.int64)
    if not codes.isin([0, 1]).all():
        raise RuntimeError(f"bundled {_SPAMBASE_FILE} has unexpected target values")
    frame[_SPAMBASE_TARGET] = codes
    features = frame.columns.drop(_SPAMBASE_TARGET)
    frame[features] = frame[features].astype(np.float64)
    return frame


def load_spambase(
    *, as_frame: bool = False, return_X_y: bool = False
) -> Bunch | tuple[np.ndarray, np.ndarray] | tuple[pd.DataFrame, pd.Series]:
    """Load the UCI Spambase data set (binary classification: is an e-mail spam?).

    =================   ==============
    Classes                          2
    Samples per class   2,788 / 1,813
    Samples total                4,601
    Dimensionality                  57
    Features            real, positive
    =================   ==============

    The data ship with the package and are read with :mod:`importlib.resources`; nothing is
    downloaded. This is the paper's *spam* data set (its "6,401 examples" is a slip for 4,601).

    Parameters
    ----------
    as_frame : bool, default=False
        If True, ``data`` is a pandas DataFrame, ``target`` a pandas Series named ``"spam"`` and
        ``frame`` a DataFrame with both.
    return_X_y : bool, default=False
        If True, return ``(data, target)`` instead of a Bunch.

    Returns
    -------
    data : sklearn.utils.Bunch
        Dictionary-like object with the attributes:

        data : ndarray of shape (4601, 57) or DataFrame
            The features, as float64.
        target : ndarray of shape (4601,) or Series
            0/1 integers, 1 = spam.
        feature_names : list of str
            The 57 column names.
        target_names : ndarray of shape (2,)
            ``["nonspam", "spam"]``, the meaning of target 0 and 1.
        frame : DataFrame of shape (4601, 58) or None
            Features and target together, only when ``as_frame=True``.
        DESCR : str
            Description of the data set, with its citation (CC BY 4.0).
    (data, target) : tuple if ``return_X_y`` is True
        ``data`` and ``target`` as described above.

    Notes
    -----
    Hopkins, M., Reeber, E., Forman, G., Suermondt, J. (1999). Spambase. UCI Machine Learning
    Repository. CC BY 4.0.

    Examples
    --------
    >>> from viboost.datasets import load_spambase
    >>> X, y = load_spambase(return_X_y=True)
    >>> X.shape, y.shape
    ((4601, 57), (4601,))
    >>> int(y.sum())
    1813
    >>> bunch = load_spambase(as_frame=True)
    >>> bunch.frame.shape
    (4601, 58)
    >>> bunch.feature_names[:3]
    ['make', 'address', 'all']
    """
    frame = _read_spambase()
    feature_names = [str(col) for col in frame.columns if col != _SPAMBASE_TARGET]
    if as_frame:
        data: np.ndarray | pd.DataFrame = frame[feature_names].copy()
        target: np.ndarray | pd.Series = frame[_SPAMBASE_TARGET].copy()
    else:
        data = frame[feature_names].to_numpy(dtype=np.float64)
        target = frame[_SPAMBASE_TARGET].to_numpy(dtype=np.int64)
    if return_X_y:
        return data, target
    return Bunch(
        data=data,
        target=target,
        feature_names=feature_names,
        target_names=np.array(["nonspam", "spam"]),
        frame=frame if as_frame else None,
        DESCR=_SPAMBASE_DESCR,
    )


def _binary_labels(y: ArrayLike, caller: str) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Copy ``y`` and check it holds exactly two distinct, non-missing values.

    Returns the copy, the two sorted values ``classes`` and, per row, the index (0 or 1) of its
    value in ``classes``.
    """
    labels = np.array(y, copy=True)
    if labels.ndim != 1:
        raise ValueError(f"y must be one-dimensional, got an array of shape {labels.shape}")
    if labels.dtype.kind in "fc" and not np.all(np.isfinite(labels)):
        raise ValueError(f"y contains NaN or infinite values; {caller} needs binary labels")
    if labels.dtype.kind == "O" and pd.isna(labels).any():
        raise ValueError(f"y contains missing values; {caller} needs binary labels")
    classes, index = np.unique(labels, return_inverse=True)
    if classes.size != 2:
        raise ValueError(
            f"y must have exactly two distinct values to flip between, got {classes.size}"
            + (f": {classes[:5].tolist()}" if 0 < classes.size <= 5 else "")
        )
    return labels, classes, index.reshape(-1)


def flip_labels(
    y: ArrayLike,
    rate: float,
    random_state: RandomStateLike = None,
) -> tuple[np.ndarray, np.ndarray]:
    """Flip an exact share of binary labels, chosen uniformly at random.

    Exactly ``round(rate * n_samples)`` rows are drawn uniformly without replacement and each
    chosen label is swapped to the other class. This is the symmetric label noise of the
    experiments: the flipped rows are the ones a noise model should find.

    Parameters
    ----------
    y : array-like of shape (n_samples,)
        Labels with exactly two distinct values, of any type (0/1, -1/+1, strings, ...).
    rate : float
        Share of the labels to flip, in [0, 1].
    random_state : int, RandomState instance, Generator or None, default=None
        Controls which rows are flipped; pass an int for reproducible output. Resolved by
        :func:`viboost._utils.validation.check_random_state` (a Generator or RandomState is used as
        is, an int seeds a ``numpy.random.RandomState`` as in scikit-learn).

    Returns
    -------
    y_noisy : ndarray of shape (n_samples,)
        A copy of ``y`` (same dtype) with the chosen labels swapped.
    flipped_mask : ndarray of bool, shape (n_samples,)
        True where the label was flipped.

    Raises
    ------
    ValueError
        If ``rate`` is not in [0, 1], or ``y`` is not one-dimensional with exactly two distinct
        (non-missing) values.

    Examples
    --------
    >>> import numpy as np
    >>> from viboost.datasets import flip_labels
    >>> y = np.array([0, 0, 1, 1, 0, 1, 0, 1, 1, 0])
    >>> y_noisy, flipped = flip_labels(y, 0.3, random_state=0)
    >>> int(flipped.sum()), int((y_noisy != y).sum())
    (3, 3)
    >>> bool(np.array_equal(y_noisy[~flipped], y[~flipped]))
    True
    >>> y_again, _ = flip_labels(y, 0.3, random_state=0)
    >>> bool(np.array_equal(y_again, y_noisy))
    True
    >>> flip_labels(["a", "b", "a", "a"], 0.5, random_state=1)[0].tolist()
    ['a', 'b', 'b', 'b']
    """
    rate = check_probability(rate, "rate")
    labels, classes, index = _binary_labels(y, "flip_labels")
    n_samples = labels.shape[0]
    n_flip = round(rate * n_samples)
    rng = check_random_state(random_state)
    chosen = rng.choice(n_samples, size=n_flip, replace=False)
    flipped = np.zeros(n_samples, dtype=bool)
    flipped[chosen] = True
    labels[flipped] = classes[1 - index[flipped]]
    return labels, flipped


def flip_labels_class_conditional(
    y: ArrayLike,
    rate_pos: float,
    rate_neg: float,
    *,
    random_state: RandomStateLike = None,
) -> tuple[np.ndarray, np.ndarray]:
    """Flip each binary label independently, with a probability that depends on its class.

    This is the binary asymmetric channel of the paper's supplement S.2 ("Accounting for label
    inversions"): a positive label is flipped with probability ``rate_pos`` (the channel's
    ``a = P(Y=-1 | V=+1)``) and a negative one with probability ``rate_neg`` (``b = P(Y=+1 |
    V=-1)``), all independently. Unlike :func:`flip_labels`, the number of flips is random.

    As in :func:`flip_labels`, the labels can be any two values: the *positive* class is the
    larger of the two in sorted order (``1`` for 0/1 or -1/+1 labels, ``"b"`` for ``"a"``/``"b"``)
    and the *negative* class the smaller.

    Parameters
    ----------
    y : array-like of shape (n_samples,)
        Labels with exactly two distinct values, of any type (0/1, -1/+1, strings, ...).
    rate_pos : float
        Probability in [0, 1] that a positive label (the larger value) is flipped.
    rate_neg : float
        Probability in [0, 1] that a negative label (the smaller value) is flipped.
    random_state : int, RandomState instance, Generator or None, default=None
        Controls which rows are flipped; pass an int for reproducible output. Resolved by
        :func:`viboost._utils.validation.check_random_state` (a Generator or RandomState is used as
        is, an int seeds a ``numpy.random.RandomState`` as in scikit-learn).

    Returns
    -------
    y_noisy : ndarray of shape (n_samples,)
        A copy of ``y`` (same dtype) with the chosen labels swapped.
    flipped_mask : ndarray of bool, shape (n_samples,)
        True where the label was flipped.

    Raises
    ------
    ValueError
        If ``rate_pos`` or ``rate_neg`` is not in [0, 1], or ``y`` is not one-dimensional with
        exactly two distinct (non-missing) values.

    Notes
    -----
    With ``rate_pos = rate_neg = r`` this is symmetric noise at rate ``r`` (each label flipped
    with probability ``r``). In the terms of S.2, the channel with ``a = rate_pos`` and
    ``b = rate_neg`` (``a + b <= 1``) is the paper's noise model with type prior
    ``theta = 1 - a - b`` and noisy labels ``+1`` with probability ``s = b / (a + b)``, i.e. a
    noise grade ``log(b / a)``.

    Examples
    --------
    >>> import numpy as np
    >>> from viboost.datasets import flip_labels_class_conditional
    >>> y = np.array([-1, 1] * 5000)
    >>> y_noisy, flipped = flip_labels_class_conditional(y, 0.3, 0.1, random_state=0)
    >>> bool(np.array_equal(y_noisy != y, flipped))
    True
    >>> round(float(flipped[y == 1].mean()), 1), round(float(flipped[y == -1].mean()), 1)
    (0.3, 0.1)
    >>> flip_labels_class_conditional(["a", "b", "b"], 0.0, 1.0)[0].tolist()
    ['b', 'b', 'b']
    """
    rate_pos = check_probability(rate_pos, "rate_pos")
    rate_neg = check_probability(rate_neg, "rate_neg")
    labels, classes, index = _binary_labels(y, "flip_labels_class_conditional")
    rng = check_random_state(random_state)
    rates = np.where(index == 1, rate_pos, rate_neg)
    flipped = rng.random(labels.shape[0]) < rates
    labels[flipped] = classes[1 - index[flipped]]
    return labels, flipped
