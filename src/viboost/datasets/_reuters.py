"""70 Reuters-21578 news stories (topics acq and crude) as a binary bag of words."""

from __future__ import annotations

import gzip
import json
from importlib.resources import files
from numbers import Integral, Real

import numpy as np
import pandas as pd
from sklearn.feature_extraction.text import CountVectorizer
from sklearn.utils import Bunch

__all__ = ["load_reuters_acq_crude"]

_REUTERS_FILE = "reuters_acq_crude.jsonl.gz"
_TOPICS = ("acq", "crude")  # target 0 = acq, 1 = crude
_TARGET_NAME = "topic"

_REUTERS_DESCR = """\
.. _reuters_acq_crude_dataset:

Reuters acq / crude data set
----------------------------

**Data Set Characteristics:**

:Number of Instances: 70 news stories (50 acq = corporate acquisitions, 20 crude = crude oil)
:Number of Attributes: one binary feature per word of the vocabulary (2,348 words with the
    default ``min_df=1``): 1 if the word occurs in the story, 0 if not
:Target: ``topic``: 0 = acq, 1 = crude
:Missing Attribute Values: None

The texts are the ``acq`` and ``crude`` example corpora of the R package tm (Debian package
r-cran-tm), 70 stories taken from the Reuters-21578 collection. The features are built with
scikit-learn's ``CountVectorizer(binary=True, lowercase=True, min_df=min_df)``: the text is
lower-cased and split into tokens of two or more letters, digits or underscores (the default
token pattern ``(?u)\\b\\w\\w+\\b``), with no stop-word removal and no stemming. Most stories end
with the sign-off "Reuter", which is kept.

This set stands in for the *state* data set of section 7 of "A Bayesian Boosting Model"
(Lorbert, Blei, Schapire, Ramadge): Gabrilovich & Markovitch (2004), 145 documents about
Illinois or Michigan with 22,648 present/absent word features, which is not publicly
distributed. Like it, this is a small text set with many more binary word features than
documents; its numbers are not the paper's, so results on it are not comparable with the
paper's figure for *state*.

.. rubric:: Citation and licence

Reuters-21578, Distribution 1.0, D. D. Lewis; free for research use. The 70-story subsets are
those shipped with the R package tm (Feinerer, I., Hornik, K., Meyer, D. (2008). Text Mining
Infrastructure in R. Journal of Statistical Software 25(5)).
"""


def _read_reuters() -> list[dict[str, str]]:
    resource = files("viboost.datasets").joinpath("data", _REUTERS_FILE)
    with resource.open("rb") as raw, gzip.open(raw, "rt", encoding="utf-8") as text:
        rows = [json.loads(line) for line in text if line.strip()]
    for row in rows:
        if not {"id", "topic", "text"} <= row.keys() or row["topic"] not in _TOPICS:
            raise RuntimeError(f"bundled {_REUTERS_FILE} has an unexpected row: {row!r:.80}")
    return rows


def _check_min_df(min_df: object) -> int | float:
    if isinstance(min_df, bool):
        pass
    elif isinstance(min_df, Integral) and int(min_df) >= 1:
        return int(min_df)
    elif isinstance(min_df, Real) and 0.0 < float(min_df) <= 1.0:
        return float(min_df)
    raise ValueError(
        "min_df must be an integer >= 1 (a number of documents) or a float in (0, 1] "
        f"(a share of the documents), got {min_df!r}"
    )


def load_reuters_acq_crude(
    *,
    return_X_y: bool = False,
    as_frame: bool = False,
    binary: bool = True,
    min_df: int | float = 1,
) -> Bunch | tuple[np.ndarray, np.ndarray] | tuple[pd.DataFrame, pd.Series]:
    """Load 70 Reuters news stories on two topics, acq and crude, as a bag of words.

    =================   ==============
    Classes                          2
    Samples per class          50 / 20
    Samples total                   70
    Dimensionality      2,348 (min_df=1)
    Features            0/1 (binary)
    =================   ==============

    The stories ship with the package and are read with :mod:`importlib.resources`; nothing is
    downloaded. They stand in for the paper's *state* data set (145 documents, 22,648
    present/absent word features, Illinois vs Michigan; Gabrilovich & Markovitch 2004), which
    is not publicly distributed. See ``DESCR`` for the source and the tokenization.

    Parameters
    ----------
    return_X_y : bool, default=False
        If True, return ``(data, target)`` instead of a Bunch.
    as_frame : bool, default=False
        If True, ``data`` is a pandas DataFrame with one column per word, ``target`` a pandas
        Series named ``"topic"`` and ``frame`` a DataFrame with both.
    binary : bool, default=True
        If True, a feature is 1 when the word occurs in the story and 0 otherwise (the
        present/absent coding the paper uses for *state*). If False, it is the number of times
        the word occurs.
    min_df : int or float, default=1
        Keep only the words that occur in at least ``min_df`` stories (an int >= 1) or in at
        least that share of the stories (a float in (0, 1]), as in
        :class:`sklearn.feature_extraction.text.CountVectorizer`.

    Returns
    -------
    data : sklearn.utils.Bunch
        Dictionary-like object with the attributes:

        data : ndarray of shape (70, n_words) or DataFrame
            The features, as float64 (a dense array: the data are small).
        target : ndarray of shape (70,) or Series
            0/1 integers: 0 = acq (corporate acquisitions, 50 stories), 1 = crude (crude oil,
            20 stories).
        feature_names : list of str
            The vocabulary, in the column order (sorted).
        target_names : ndarray of shape (2,)
            ``["acq", "crude"]``, the meaning of target 0 and 1.
        ids : ndarray of shape (70,)
            Unique story identifiers ``"<topic>/<file>"`` (``"acq/reut-00001.xml"``, ...,
            ``"crude/reut-00001.xml"``, ...), in row order: tm numbers the files of each
            corpus on its own, so a file name alone repeats across the two topics.
        text : list of str
            The raw stories, in row order, for other tokenizations.
        frame : DataFrame of shape (70, n_words + 1) or None
            Features and target together, only when ``as_frame=True``.
        DESCR : str
            Description of the data set, with its source.
    (data, target) : tuple if ``return_X_y`` is True
        ``data`` and ``target`` as described above.

    Raises
    ------
    ValueError
        If ``min_df`` is not an integer >= 1 or a float in (0, 1], or keeps no word.

    Examples
    --------
    >>> import numpy as np
    >>> from viboost.datasets import load_reuters_acq_crude
    >>> bunch = load_reuters_acq_crude()
    >>> bunch.data.shape, bunch.data.dtype
    ((70, 2348), dtype('float64'))
    >>> np.bincount(bunch.target).tolist(), bunch.target_names.tolist()
    ([50, 20], ['acq', 'crude'])
    >>> bunch.ids[[0, -1]].tolist()
    ['acq/reut-00001.xml', 'crude/reut-00023.xml']
    >>> sorted(np.unique(bunch.data).tolist())
    [0.0, 1.0]
    >>> X, y = load_reuters_acq_crude(return_X_y=True, min_df=5)
    >>> X.shape
    (70, 284)
    >>> load_reuters_acq_crude(as_frame=True).frame.shape
    (70, 2349)
    """
    min_df = _check_min_df(min_df)
    rows = _read_reuters()
    texts = [row["text"] for row in rows]
    vectorizer = CountVectorizer(binary=bool(binary), lowercase=True, min_df=min_df)
    data = vectorizer.fit_transform(texts).toarray().astype(np.float64)
    feature_names = [str(word) for word in vectorizer.get_feature_names_out()]
    target = np.array([_TOPICS.index(row["topic"]) for row in rows], dtype=np.int64)
    ids = np.array([f"{row['topic']}/{row['id']}" for row in rows])
    frame = None
    if as_frame:
        data = pd.DataFrame(data, columns=feature_names)
        target = pd.Series(target, name=_TARGET_NAME)
        frame = pd.concat([data, target], axis=1)
    if return_X_y:
        return data, target
    return Bunch(
        data=data,
        target=target,
        feature_names=feature_names,
        target_names=np.array(_TOPICS),
        ids=ids,
        text=texts,
        frame=frame,
        DESCR=_REUTERS_DESCR,
    )
