"""DaskVIBoostClassifier with categorical features (issue 53): the in-memory model on the
computed frame, the refusals before any work (unknown categories, too many distinct values,
undeclared text columns), text columns categorised, predictions matched by value, to_local and
K classes."""

from __future__ import annotations

import copy
import pickle

import numpy as np
import pandas as pd
import pytest

da = pytest.importorskip("dask.array")
dd = pytest.importorskip("dask.dataframe")
distributed = pytest.importorskip("distributed")
dask = pytest.importorskip("dask")

from viboost import VIBoostClassifier  # noqa: E402
from viboost.dask import DaskVIBoostClassifier, blocks  # noqa: E402

RTOL = 1e-9
#: The fields of a node that fix a learner's structure, categorical splits included.
STRUCTURE = (
    "feature",
    "bin_threshold",
    "threshold",
    "missing_left",
    "left",
    "right",
    "is_leaf",
    "is_categorical",
    "left_categories",
)
CITIES = np.array(["paris", "rome", "oslo", "lima", "kyiv", "bern", "doha", "baku"])


@pytest.fixture(scope="module")
def client():
    with distributed.Client(
        processes=False, n_workers=1, threads_per_worker=2, dashboard_address=None
    ) as client:
        yield client


class _NoClient:
    """A client that fails if anything is scheduled."""

    def __getattr__(self, name):
        raise AssertionError(f"work was scheduled (client.{name}) before the input was checked")


def _frame(n: int = 2400, seed: int = 0, n_classes: int = 2) -> tuple[pd.DataFrame, np.ndarray]:
    """A numeric column, a text column with missing values, a ``category`` column with an
    unused category and an integer column; labels that depend on both categorical columns."""
    rng = np.random.default_rng(seed)
    city = rng.integers(0, CITIES.size, n)
    effect = np.array([1.5, -1.0, 0.5, -0.5, 2.0, -2.0, 0.0, 1.0])
    x = rng.normal(size=n)
    colour = rng.choice(["red", "green", "blue"], n)
    text = pd.Series(CITIES[city], dtype=object)
    text[rng.random(n) < 0.05] = None
    X = pd.DataFrame(
        {
            "x": x,
            "city": text,
            "colour": pd.Categorical(colour, categories=["red", "green", "blue", "unused"]),
            "k": rng.integers(0, 4, n),
        }
    )
    score = effect[city] + x + (colour == "red") + 0.5 * rng.normal(size=n)
    if n_classes == 2:
        y = (score > 0.5).astype(int)
    else:
        y = np.digitize(score, np.quantile(score, np.linspace(0, 1, n_classes + 1)[1:-1]))
    return X, y


def _dask(X: pd.DataFrame, y: np.ndarray, npartitions: int = 3) -> tuple:
    return dd.from_pandas(X, npartitions=npartitions), dd.from_pandas(pd.Series(y), npartitions)


def _learners(model) -> list:
    """The fitted learners in one list (K classes: round by round, class by class)."""
    return [
        learner
        for entry in model.estimators_
        for learner in (entry if isinstance(entry, list | tuple) else [entry])
    ]


def _assert_same_model(got, want) -> None:
    assert np.shape(got.estimators_) == np.shape(want.estimators_)
    for learner, expected in zip(_learners(got), _learners(want), strict=True):
        for name in STRUCTURE:
            np.testing.assert_array_equal(learner.nodes[name], expected.nodes[name], name)
        np.testing.assert_allclose(learner.nodes["value"], expected.nodes["value"], rtol=RTOL)
    np.testing.assert_allclose(got.alphas_, want.alphas_, rtol=RTOL)
    np.testing.assert_array_equal(got.is_categorical_, want.is_categorical_)
    assert len(got.categories_) == len(want.categories_)
    for mine, theirs in zip(got.categories_, want.categories_, strict=True):
        assert (mine is None) == (theirs is None)
        if mine is not None:
            np.testing.assert_array_equal(mine, theirs)


@pytest.mark.filterwarnings("ignore::sklearn.exceptions.ConvergenceWarning")  # few rounds
@pytest.mark.parametrize(
    "params",
    [
        {"n_estimators": 15, "preset": "paper"},
        {"n_estimators": 6, "preset": "robust", "cv": 2, "n_iter_no_change": None},
    ],
    ids=["paper-stumps", "robust-trees"],
)
def test_known_categories_give_the_in_memory_model(client, params):
    X, y = _frame()
    ddf, dy = _dask(X, y)
    got = DaskVIBoostClassifier(random_state=0, client=client, block_size=1000, **params)
    got.fit(ddf, dy)
    local = ddf.compute()  # (dask reads the text column as strings, as the fit saw it)
    want = VIBoostClassifier(random_state=0, **params).fit(local, y)
    _assert_same_model(got, want)
    assert got.is_categorical_.tolist() == [False, True, True, False]
    assert got.categories_[1].tolist() == sorted(CITIES.tolist())
    assert got.categories_[2].tolist() == ["red", "green", "blue"]  # present ones, dtype order
    # The category splits are used (the labels depend on both categorical columns).
    learners = _learners(got)
    split_on = {int(f) for e in learners for f in e.nodes["feature"][~e.nodes["is_leaf"]]}
    assert {1, 2} <= split_on
    assert any(e.nodes["is_categorical"].any() for e in learners)
    proba = got.predict_proba(ddf)
    assert isinstance(proba, da.Array)
    np.testing.assert_allclose(proba.compute(), want.predict_proba(local), rtol=RTOL, atol=1e-12)
    # In-memory input goes through the same encoder.
    np.testing.assert_allclose(got.predict_proba(local), want.predict_proba(local), rtol=RTOL)
    # The per-row noise statistics, computed on the blocks.
    for name in ("clean_proba_", "mislabel_proba_"):
        rows = getattr(got, name).compute()
        np.testing.assert_allclose(rows, getattr(want, name), rtol=RTOL, atol=1e-300)
    if params["preset"] == "robust":
        # A block reuses a tree's leaves only for a tree of the same structure: category sets
        # included.
        tree = next(e for e in learners if e.nodes["is_categorical"].any())
        assert blocks._same_structure(tree, copy.deepcopy(tree))
        other = copy.deepcopy(tree)
        node = int(np.flatnonzero(other.nodes["is_categorical"])[0])
        other.nodes["left_categories"][node, 0] ^= np.uint64(1)
        assert not blocks._same_structure(tree, other)


def test_numeric_columns_declared_categorical_as_in_memory(client):
    """Indices over a dask array, names over a dataframe: integer codes are categories (negative
    values missing), as in memory."""
    X, y = _frame(1200, seed=3)
    values = X[["x", "k"]].to_numpy()
    values[::50, 1] = -1
    params = {"n_estimators": 8, "preset": "paper", "random_state": 0}
    want = VIBoostClassifier(categorical_features=[1], **params).fit(values, y)
    dX = da.from_array(values, chunks=(400, 2))
    got = DaskVIBoostClassifier(categorical_features=[1], client=client, **params)
    got.fit(dX, da.from_array(y, chunks=400))
    _assert_same_model(got, want)
    assert got.categories_[1].tolist() == [0.0, 1.0, 2.0, 3.0]
    np.testing.assert_allclose(
        got.predict_proba(dX).compute(), want.predict_proba(values), rtol=RTOL, atol=1e-12
    )
    frame = pd.DataFrame(values, columns=["x", "k"])
    by_name = DaskVIBoostClassifier(categorical_features=["k"], client=client, **params)
    by_name.fit(dd.from_pandas(frame, npartitions=2), dd.from_pandas(pd.Series(y), 2))
    _assert_same_model(by_name, want)


def test_unknown_categories_are_refused_before_any_work():
    X, y = _frame(40)
    ddf, dy = _dask(X, y, 2)
    ddf["colour"] = ddf["colour"].cat.as_unknown()
    assert not ddf["colour"].cat.known
    with pytest.raises(ValueError, match=r"\['colour'\].*X = X.categorize\(columns=\['colour'\]\)"):
        DaskVIBoostClassifier(client=_NoClient()).fit(ddf, dy)
    # Not a categorical feature (an explicit list): refused as a non-numeric column.
    with pytest.raises(ValueError, match=r"non-numeric column\(s\) \['colour'\]"):
        DaskVIBoostClassifier(categorical_features=["city"], client=_NoClient()).fit(ddf, dy)


@pytest.mark.filterwarnings("ignore::sklearn.exceptions.ConvergenceWarning")
def test_object_and_string_columns_are_categorised(client):
    X, y = _frame(1200, seed=1)
    with dask.config.set({"dataframe.convert-string": False}):  # keep the object dtype
        ddf, dy = _dask(X, y)
        assert ddf.dtypes["city"] == np.dtype(object)
        got = DaskVIBoostClassifier(6, preset="paper", client=client, random_state=0)
        got.fit(ddf, dy)
    want = VIBoostClassifier(6, preset="paper", random_state=0).fit(X, y)
    _assert_same_model(got, want)
    # A string column ("string" dtype) gives the same categories; an empty partition is fine.
    strings = X.astype({"city": "string"})
    ddf, dy = _dask(strings, y)
    ddf = dd.concat([ddf.partitions[0], dd.from_pandas(strings.iloc[:0], 1), ddf.partitions[1:]])
    dy = dd.concat([dy.partitions[0], dd.from_pandas(pd.Series(y[:0]), 1), dy.partitions[1:]])
    other = DaskVIBoostClassifier(6, preset="paper", client=client, random_state=0).fit(ddf, dy)
    _assert_same_model(other, want)
    np.testing.assert_array_equal(other.predict(ddf).compute(), want.predict(X))


def test_too_many_distinct_strings_fail_fast_naming_the_column(client, monkeypatch):
    n = 20_000
    rng = np.random.default_rng(2)
    X = pd.DataFrame({"x": rng.normal(size=n), "email": [f"user{i}@mail" for i in range(n)]})
    y = rng.integers(0, 2, n)
    ddf, dy = _dask(X, y, 4)
    collected = []
    original = dd.Series.drop_duplicates

    def spy(self, *args, **kwargs):
        collected.append(self.name)
        return original(self, *args, **kwargs)

    monkeypatch.setattr(dd.Series, "drop_duplicates", spy)
    message = r"column 'email' has about \d+ distinct categories, more than max_bins=255"
    with pytest.raises(ValueError, match=message) as error:
        DaskVIBoostClassifier(5, preset="paper", client=client).fit(ddf, dy)
    assert "its dtype is" in str(error.value)
    assert collected == []  # refused on the estimate: its values were never collected
    # Just above max_bins: the exact count (after the estimate let it through).
    small = pd.DataFrame({"x": np.arange(60.0), "code": [f"c{i % 15}" for i in range(60)]})
    ddf, dy = _dask(small, np.arange(60) % 2, 2)
    with pytest.raises(ValueError, match=r"column 'code' has 15 distinct categories"):
        DaskVIBoostClassifier(5, preset="paper", max_bins=10, client=client).fit(ddf, dy)
    assert collected == ["code"]  # (the spy sees the values collected)


@pytest.mark.filterwarnings("ignore::sklearn.exceptions.ConvergenceWarning")
def test_predictions_match_categories_by_value(client):
    X, y = _frame(1500, seed=4)
    ddf, dy = _dask(X, y)
    model = DaskVIBoostClassifier(10, preset="paper", client=client, random_state=0)
    model.fit(ddf, dy)
    local = ddf.compute()
    want = model.predict_proba(ddf).compute()
    # The category column with its categories in another order, as unknown categories (not
    # needed to predict), and the text column as a category column: the same predictions.
    other = local.copy()
    other["colour"] = other["colour"].cat.reorder_categories(["unused", "blue", "green", "red"])
    other["city"] = other["city"].astype("category")
    frame = dd.from_pandas(other, npartitions=4)
    frame["colour"] = frame["colour"].cat.as_unknown()
    np.testing.assert_array_equal(model.predict_proba(frame).compute(), want)
    # Categories not seen in fit go to the missing side, as missing values do, without error.
    unseen = local.copy()
    unseen["city"] = unseen["city"].where(np.arange(len(unseen)) % 3 > 0, "atlantis")
    unseen["colour"] = unseen["colour"].cat.add_categories(["violet"])
    unseen.loc[unseen.index[::4], "colour"] = "violet"
    missing = local.copy()
    missing["city"] = missing["city"].where(np.arange(len(missing)) % 3 > 0, None)
    missing.loc[missing.index[::4], "colour"] = np.nan
    got = model.predict_proba(dd.from_pandas(unseen, npartitions=2)).compute()
    np.testing.assert_array_equal(got, model.predict_proba(dd.from_pandas(missing, 3)).compute())
    np.testing.assert_array_equal(got, model.to_local().predict_proba(unseen))
    # What the in-memory estimator refuses: another width, an undeclared text column, numbers
    # in a column fitted with strings (found as the partition is encoded).
    with pytest.raises(ValueError, match="X has 3 features, but DaskVIBoostClassifier is expecti"):
        model.predict(dd.from_pandas(local.drop(columns="k"), npartitions=2))
    with pytest.raises(ValueError, match=r"non-numeric column\(s\) \['x'\]"):
        model.predict(dd.from_pandas(local.assign(x=local["x"].astype(str)), npartitions=2))
    numbers = dd.from_pandas(local.assign(city=np.arange(len(local)) % 3), npartitions=2)
    with pytest.raises(ValueError, match="column 'city' was fitted with strings"):
        model.predict(numbers).compute()


@pytest.mark.filterwarnings("ignore::sklearn.exceptions.ConvergenceWarning")
def test_to_local_and_pickles_keep_the_encoder(client):
    X, y = _frame(1200, seed=5)
    ddf, dy = _dask(X, y)
    model = DaskVIBoostClassifier(8, preset="paper", client=client, random_state=0)
    model.fit(ddf, dy)
    local = model.to_local()
    assert type(local) is VIBoostClassifier
    assert local._encoder is not model._encoder  # its own copy
    np.testing.assert_array_equal(local.is_categorical_, model.is_categorical_)
    frame = ddf.compute()
    want = model.predict_proba(ddf).compute()
    np.testing.assert_array_equal(local.predict_proba(frame), want)
    # The pandas frame as given (the text column of dtype object), encoded alike.
    np.testing.assert_array_equal(local.predict_proba(X), want)
    again = pickle.loads(pickle.dumps(model))
    np.testing.assert_array_equal(again.predict_proba(X), want)
    for fitted in (local, again):
        for mine, theirs in zip(fitted.categories_, model.categories_, strict=True):
            assert (mine is None) == (theirs is None)
            if mine is not None:
                np.testing.assert_array_equal(mine, theirs)


@pytest.mark.filterwarnings("ignore::sklearn.exceptions.ConvergenceWarning")
def test_k_classes_with_a_categorical_column(client):
    X, y = _frame(1500, seed=6, n_classes=3)
    ddf, dy = _dask(X, y)
    params = {"n_estimators": 4, "cv": 2, "n_iter_no_change": None, "random_state": 0}
    got = DaskVIBoostClassifier(client=client, block_size=750, **params).fit(ddf, dy)
    want = VIBoostClassifier(**params).fit(ddf.compute(), y)
    assert got.classes_.tolist() == [0, 1, 2]
    _assert_same_model(got, want)
    assert any(e.nodes["is_categorical"].any() for e in _learners(got))
    proba = got.predict_proba(ddf).compute()
    assert proba.shape == (len(y), 3)
    np.testing.assert_allclose(proba, want.predict_proba(ddf.compute()), rtol=1e-9, atol=1e-12)
