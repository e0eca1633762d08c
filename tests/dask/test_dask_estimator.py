"""viboost.dask.DaskVIBoostClassifier: the same model as the in-memory fit for any workers and
partitions (stumps and trees), lazy predictions, and the faults a user meets (empty partitions,
NaN, non-numeric columns, a worker restarted mid-fit, a cluster with no workers)."""

from __future__ import annotations

import pickle
import threading
import time
import warnings

import numpy as np
import pandas as pd
import pytest

da = pytest.importorskip("dask.array")
dd = pytest.importorskip("dask.dataframe")
distributed = pytest.importorskip("distributed")

from viboost import VIBoostClassifier  # noqa: E402
from viboost.boosting.booster import Booster  # noqa: E402
from viboost.dask import DaskVIBoostClassifier  # noqa: E402
from viboost.presets import PRESETS  # noqa: E402

RTOL = 1e-9
#: The fields of a node that fix a learner's structure (compared exactly).
STRUCTURE = ("feature", "bin_threshold", "threshold", "missing_left", "left", "right", "is_leaf")


def _data(n: int = 6000, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """Features with missing values and an integer column; labels with 15% flips."""
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, 5))
    X[:, 3] = rng.integers(0, 6, n)
    X[rng.random((n, 5)) < 0.03] = np.nan
    score = np.nan_to_num(X[:, 0]) + 0.7 * np.nan_to_num(X[:, 1]) - 0.3 * np.nan_to_num(X[:, 3])
    y = (score > 0).astype(int)
    flip = rng.random(n) < 0.15
    y[flip] = 1 - y[flip]
    return X, y


def _step_data(n: int = 6000) -> tuple[np.ndarray, np.ndarray]:
    """The features of :func:`_data`; labels from one threshold, 15% flipped (cross-fitting
    stops after a few checks)."""
    X, _ = _data(n)
    rng = np.random.default_rng(1)
    y = (np.nan_to_num(X[:, 0]) > 0.2).astype(int)
    flip = rng.random(n) < 0.15
    y[flip] = 1 - y[flip]
    return X, y


@pytest.fixture(scope="module")
def one_worker():
    with (
        distributed.LocalCluster(
            n_workers=1, threads_per_worker=1, processes=False, dashboard_address=None
        ) as cluster,
        distributed.Client(cluster, set_as_default=False) as client,
    ):
        yield client


@pytest.fixture(scope="module")
def data():
    return _data()


def _assert_same_learners(got: list, want: list) -> None:
    """The same learners: equal structure (features, bins, thresholds, children), leaf values,
    gains and covers within RTOL."""
    assert len(got) == len(want)
    for learner, expected in zip(got, want, strict=True):
        assert type(learner) is type(expected)
        nodes, expected_nodes = learner.nodes, expected.nodes
        for name in STRUCTURE:
            np.testing.assert_array_equal(nodes[name], expected_nodes[name], err_msg=name)
        for name in ("value", "gain", "cover"):
            np.testing.assert_allclose(
                nodes[name], expected_nodes[name], rtol=RTOL, atol=1e-12, err_msg=name
            )


def _fit_weighted_both(client, params, X, y, weight, chunk: int, block_size: int) -> tuple:
    """The in-memory fit and the Dask fit (input in chunks of ``chunk`` rows) of the same
    weighted rows, both with ``random_state=0``."""
    want = VIBoostClassifier(random_state=0, **params).fit(X, y, sample_weight=weight)
    got = DaskVIBoostClassifier(random_state=0, client=client, block_size=block_size, **params)
    got.fit(
        da.from_array(X, chunks=(chunk, X.shape[1])),
        da.from_array(y, chunks=chunk),
        da.from_array(weight, chunks=chunk),
    )
    return want, got


def _assert_same_model(got, want, client=None, X=None) -> None:
    _assert_same_learners(got.estimators_, want.estimators_)
    np.testing.assert_allclose(got.alphas_, want.alphas_, rtol=RTOL)
    for name in ("snr_", "noise_grade_", "noise_rate_"):
        np.testing.assert_allclose(getattr(got, name), getattr(want, name), rtol=RTOL)
    for name in ("clean_proba_", "mislabel_proba_"):
        rows = getattr(got, name).compute(scheduler=client or got.client)
        np.testing.assert_allclose(rows, getattr(want, name), rtol=RTOL, atol=1e-300)
    if X is not None:
        np.testing.assert_allclose(
            got.decision_function(X), want.decision_function(X), rtol=RTOL, atol=1e-9
        )


@pytest.mark.filterwarnings("ignore::sklearn.exceptions.ConvergenceWarning")  # few rounds
@pytest.mark.parametrize(
    "params",
    [
        {"n_estimators": 20, "preset": "paper"},
        # The robust preset with stumps and early stopping (it stops well before 300 rounds).
        {
            "n_estimators": 300,
            "preset": "robust",
            "cv": 3,
            "n_iter_no_change": 10,
            "max_leaf_nodes": 2,
            "leaf_weights": "tied",
        },
        # The robust default: 31-leaf trees with per-leaf weights (few rounds: each tree is
        # about one exchange with the workers per level).
        {"n_estimators": 10, "preset": "robust", "cv": 2, "n_iter_no_change": None},
    ],
    ids=["paper", "robust-stumps", "robust-trees"],
)
def test_same_model_as_in_memory_for_any_workers_and_partitions(
    data, two_workers, one_worker, params
):
    robust_stumps = params["preset"] == "robust" and params.get("max_leaf_nodes") == 2
    if params["preset"] == "paper":
        X, y = data
    else:
        X, y = _step_data(4500) if robust_stumps else _data(4500)
    want = VIBoostClassifier(random_state=0, **params).fit(X, y)
    fits = []
    for client, n_partitions in ((two_workers, 4), (one_worker, 7)):
        rows = -(-len(y) // n_partitions)
        dX = da.from_array(X, chunks=(rows, X.shape[1]))
        dy = da.from_array(y, chunks=rows)
        assert dX.npartitions == n_partitions
        got = DaskVIBoostClassifier(random_state=0, client=client, block_size=1500, **params)
        got.fit(dX, dy)
        _assert_same_model(got, want, X=X)
        # clean_proba_ is a dask array aligned with the training partitions.
        assert got.clean_proba_.chunks == dy.chunks
        fits.append(got)
    # The blocks, hence every sum, do not depend on the workers or the partitions: bit for bit.
    np.testing.assert_array_equal(fits[0].alphas_, fits[1].alphas_)
    for learner, other in zip(fits[0].estimators_, fits[1].estimators_, strict=True):
        np.testing.assert_array_equal(learner.nodes, other.nodes)
    assert fits[0].snr_ == fits[1].snr_
    if params["preset"] == "robust":
        np.testing.assert_array_equal(fits[0].cv_rounds_, want.cv_rounds_)
        np.testing.assert_array_equal(fits[0].cv_log_likelihood_, fits[1].cv_log_likelihood_)
        np.testing.assert_allclose(
            fits[0].noise_rate_interval_, want.noise_rate_interval_, rtol=RTOL
        )
    if robust_stumps:
        assert want.cv_rounds_[-1] < params["n_estimators"]  # it stopped early
    if "max_leaf_nodes" not in params and params["preset"] == "robust":
        leaves = PRESETS["robust"].max_leaf_nodes
        assert fits[0].plan_.max_leaf_nodes == leaves
        assert max(tree.n_leaves for tree in fits[0].estimators_) == leaves


@pytest.mark.parametrize(
    "params",
    [
        # Algorithm 1 with trees: +-1 leaves and one weight per tree, the noise model in-sample.
        {"n_estimators": 8, "preset": "paper", "max_leaf_nodes": 6},
        # Per-leaf weights at the approximate mode (the smoothed split score), in-sample.
        {"n_estimators": 8, "preset": "paper", "max_leaf_nodes": 6, "leaf_weights": "per-leaf"},
        # The robust preset's trees, in-sample, with a depth limit.
        {"n_estimators": 8, "noise_fit": "in-sample", "max_depth": 3},
    ],
    ids=["tied", "per-leaf-approx", "depth"],
)
def test_trees_fitted_in_sample_match_in_memory(two_workers, params):
    """Trees on the in-sample path. The sample weights are continuous: under equal weights the
    error score of tied trees ties exactly between nodes, and exact ties may go either way
    across summation orders."""
    X, y = _data(6000)
    weight = np.random.default_rng(5).uniform(0.5, 2.0, len(y))
    want, got = _fit_weighted_both(two_workers, params, X, y, weight, 1200, 1500)
    _assert_same_model(got, want, X=X)
    assert max(tree.n_leaves for tree in got.estimators_) > 2


def test_predictions_are_lazy_and_match(data, two_workers):
    X, y = data
    model = DaskVIBoostClassifier(20, preset="paper", client=two_workers, random_state=0)
    model.fit(da.from_array(X, chunks=2000), da.from_array(y, chunks=2000))
    local = model.to_local()
    assert type(local) is VIBoostClassifier
    dX = da.from_array(X, chunks=1500)
    for method in ("decision_function", "predict", "predict_proba", "predict_log_proba"):
        lazy = getattr(model, method)(dX)
        assert isinstance(lazy, da.Array), method
        np.testing.assert_allclose(lazy.compute(), getattr(local, method)(X), rtol=1e-12)
    # In-memory input gets in-memory output.
    np.testing.assert_array_equal(model.predict(X), local.predict(X))
    # Pickled without the client, per-row attributes computed.
    again = pickle.loads(pickle.dumps(model))
    assert again.client is None
    np.testing.assert_allclose(again.clean_proba_, local.clean_proba_)
    np.testing.assert_array_equal(again.predict(X), local.predict(X))


def test_dataframe_input_with_an_empty_partition(two_workers):
    X, y = _data(3000, seed=1)
    frame = pd.DataFrame(X, columns=[f"f{j}" for j in range(X.shape[1])])
    ddf = dd.from_pandas(frame, npartitions=3)
    empty = dd.from_pandas(frame.iloc[:0], npartitions=1)
    ddf = dd.concat([ddf.partitions[0], empty, ddf.partitions[1:]])
    series = pd.Series(y, name="label")
    labels = dd.from_pandas(series, npartitions=3)
    no_labels = dd.from_pandas(series.iloc[:0], npartitions=1)
    labels = dd.concat([labels.partitions[0], no_labels, labels.partitions[1:]])
    assert ddf.npartitions == labels.npartitions == 4
    got = DaskVIBoostClassifier(15, preset="paper", client=two_workers, random_state=0).fit(
        ddf, labels
    )
    want = VIBoostClassifier(15, preset="paper", random_state=0).fit(frame, y)
    _assert_same_model(got, want)
    np.testing.assert_array_equal(got.feature_names_in_, want.feature_names_in_)
    pred = got.predict(ddf)
    np.testing.assert_array_equal(pred.compute(), want.predict(frame))
    with pytest.raises(ValueError, match="feature names should match"):
        got.predict(ddf.rename(columns={"f0": "other"}))


class _NoClient:
    """A client that fails if anything is scheduled."""

    def __getattr__(self, name):
        raise AssertionError(f"work was scheduled (client.{name}) before the input was checked")


def test_non_numeric_columns_are_refused_before_any_work():
    """Text columns are categorical features by default (tests/dask/test_dask_categorical.py);
    one left out of an explicit list of categorical features is refused, by name, before
    anything is scheduled."""
    frame = pd.DataFrame(
        {
            "x": [1.0, 2.0, 3.0, 4.0],
            "colour": ["red", "blue", "red", "red"],
            "city": ["a", "b", "a", "b"],
        }
    )
    ddf = dd.from_pandas(frame, npartitions=2)
    y = dd.from_pandas(pd.Series([0, 1, 0, 1]), npartitions=2)
    message = r"non-numeric column\(s\) \['colour'\].*or list them in categorical_features"
    for categorical in (["city"], [False, False, True], [2]):
        with pytest.raises(ValueError, match=message):
            DaskVIBoostClassifier(categorical_features=categorical, client=_NoClient()).fit(ddf, y)
    with pytest.raises(ValueError, match=r"non-numeric column\(s\) \['colour', 'city'\]"):
        DaskVIBoostClassifier(categorical_features=None, client=_NoClient()).fit(ddf, y)


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ("inf_X", "X contains infinity"),
        ("nan_y", "y contains NaN"),
        ("negative_weight", "sample_weight must be finite and nonnegative"),
        ("one_class", "needs at least 2 classes"),
        # K classes are cross-fitted, as in memory: the paper preset (in-sample) is refused.
        ("three_classes", "Only binary classification is supported with noise_fit='in-sample'"),
    ],
)
def test_bad_values_get_clear_errors(two_workers, change, message):
    X, y = _data(400, seed=2)
    y = y.astype(float)
    weight = np.ones(len(y))
    if change == "inf_X":
        X[7, 2] = np.inf
    elif change == "nan_y":
        y[5] = np.nan
    elif change == "negative_weight":
        weight[3] = -1.0
    elif change == "one_class":
        y[:] = 1.0
    else:
        y[:3] = 2.0
    with pytest.raises(ValueError, match=message):
        DaskVIBoostClassifier(5, preset="paper", client=two_workers).fit(
            da.from_array(X, chunks=100), da.from_array(y, chunks=100), da.from_array(weight)
        )


def _three_classes(n: int = 600, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """Three classes from a score with missing values, 20% of the labels moved to another class
    (class indices)."""
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, 4))
    X[rng.random((n, 4)) < 0.03] = np.nan
    clean = np.nan_to_num(X)
    y = np.digitize(clean[:, 0] + 0.5 * clean[:, 1], [-0.6, 0.6])
    moved = rng.random(n) < 0.2
    y[moved] = (y[moved] + rng.integers(1, 3, moved.sum())) % 3
    return X, y


@pytest.mark.filterwarnings("ignore::sklearn.exceptions.ConvergenceWarning")  # few rounds
def test_k_classes_fit_the_in_memory_model(two_workers, one_worker):
    """Issue 23: three classes (string labels, sample weights with zeros) on 4 blocks fit the
    in-memory K-class model: the same trees per class, alphas, round counts, noise matrix,
    per-row noise statistics and probabilities, up to the order of the sums; bit for bit the
    same for other workers and partitions."""
    X, y = _three_classes()
    names = np.array(["cat", "dog", "emu"])
    weight = np.random.default_rng(1).integers(0, 4, len(y)).astype(float)
    params = {"n_estimators": 20, "cv": 3, "n_iter_no_change": None, "random_state": 0}
    want = VIBoostClassifier(**params).fit(X, names[y], sample_weight=weight)
    fits = []
    for client, rows in ((two_workers, 150), (one_worker, 86)):
        got = DaskVIBoostClassifier(client=client, block_size=150, **params).fit(
            da.from_array(X, chunks=(rows, 4)),
            da.from_array(names[y], chunks=rows),
            da.from_array(weight, chunks=rows),
        )
        fits.append(got)
    got = fits[0]
    np.testing.assert_array_equal(got.classes_, want.classes_)
    n_rounds = len(want.estimators_)
    assert np.shape(got.estimators_) == (n_rounds, 3) and got.alphas_.shape == (n_rounds, 3)
    for k in range(3):
        _assert_same_learners(
            [learners[k] for learners in got.estimators_],
            [learners[k] for learners in want.estimators_],
        )
    assert max(tree.n_leaves for learners in got.estimators_ for tree in learners) > 2
    np.testing.assert_allclose(got.alphas_, want.alphas_, rtol=RTOL)
    np.testing.assert_array_equal(got.cv_rounds_, want.cv_rounds_)
    np.testing.assert_allclose(got.cv_log_likelihood_, want.cv_log_likelihood_, rtol=RTOL)
    assert got.cv_n_passes_ == want.cv_n_passes_ == 1
    np.testing.assert_allclose(got.refit_weight_.compute(), want.refit_weight_, rtol=RTOL)
    assert got.noise_channel_ == want.noise_channel_
    assert type(got.noise_calibration_) is type(want.noise_calibration_)
    for name in (
        "snr_", "eta_", "omega_", "noise_rate_", "noise_rate_interval_", "flip_rates_",
        "flip_rates_interval_", "label_joint_", "noise_matrix_",
    ):  # fmt: skip
        np.testing.assert_allclose(getattr(got, name), getattr(want, name), rtol=RTOL, err_msg=name)
    assert np.isnan(got.noise_grade_) and got.plan_ == want.plan_
    for name in ("clean_proba_", "mislabel_proba_", "true_class_proba_", "cv_decision_function_"):
        rows = getattr(got, name)
        assert isinstance(rows, da.Array), name
        assert rows.chunks[0] == (150,) * 4, name
        np.testing.assert_allclose(
            rows.compute(), getattr(want, name), rtol=RTOL, atol=1e-12, err_msg=name
        )
    dX = da.from_array(X, chunks=(250, 4))
    for method in ("decision_function", "predict_proba", "predict_log_proba"):
        lazy = getattr(got, method)(dX)
        assert isinstance(lazy, da.Array) and lazy.shape == (len(y), 3), method
        np.testing.assert_allclose(
            lazy.compute(), getattr(want, method)(X), rtol=RTOL, atol=1e-12, err_msg=method
        )
    np.testing.assert_array_equal(got.predict(dX).compute(), want.predict(X))
    np.testing.assert_array_equal(got.predict(X), want.predict(X))
    local = got.to_local()
    assert type(local) is VIBoostClassifier and local.noise_channel == "auto"
    assert isinstance(local.true_class_proba_, np.ndarray)
    np.testing.assert_allclose(local.predict_proba(X), want.predict_proba(X), rtol=RTOL)
    # The blocks, hence every sum, do not depend on the workers or the partitions.
    np.testing.assert_array_equal(fits[1].alphas_, got.alphas_)
    np.testing.assert_array_equal(fits[1].noise_matrix_, got.noise_matrix_)


@pytest.mark.filterwarnings("ignore::sklearn.exceptions.ConvergenceWarning")  # few rounds
def test_k_classes_drop_the_flagged_rows_as_in_memory(two_workers):
    """mislabeled="drop" on the blocks: the same second search and refit as in memory."""
    X, y = _three_classes(seed=3)
    params = {"n_estimators": 30, "cv": 3, "random_state": 0, "mislabeled": "drop"}
    want = VIBoostClassifier(**params).fit(X, y)
    got = DaskVIBoostClassifier(client=two_workers, block_size=150, **params).fit(
        da.from_array(X, chunks=(200, 4)), da.from_array(y, chunks=200)
    )
    assert got.cv_n_passes_ == want.cv_n_passes_ == 2
    np.testing.assert_array_equal(got.cv_rounds_, want.cv_rounds_)
    assert got.cv_best_rounds_ == want.cv_best_rounds_
    np.testing.assert_array_equal(got.refit_weight_.compute(), want.refit_weight_)
    np.testing.assert_allclose(
        got.decision_function(X), want.decision_function(X), rtol=RTOL, atol=1e-12
    )


@pytest.mark.filterwarnings("ignore::sklearn.exceptions.ConvergenceWarning")  # few rounds
def test_k_classes_average_the_fold_boosters_as_in_memory(two_workers):
    """final_model="fold-average" on the blocks: the same fold boosters as in memory."""
    X, y = _three_classes(seed=4)
    params = {"n_estimators": 30, "cv": 3, "random_state": 0, "final_model": "fold-average"}
    want = VIBoostClassifier(**params).fit(X, y)
    got = DaskVIBoostClassifier(client=two_workers, block_size=150, **params).fit(
        da.from_array(X, chunks=(200, 4)), da.from_array(y, chunks=200)
    )
    assert len(got.estimators_) == len(want.estimators_) == 3 * want.cv_best_rounds_
    np.testing.assert_allclose(
        got.decision_function(X), want.decision_function(X), rtol=RTOL, atol=1e-12
    )


def test_k_classes_fit_a_class_of_one_row_as_in_memory(two_workers):
    X, y = _three_classes(300, seed=2)
    y[y == 2] = 1
    y[17] = 2  # class 2: a single row, seen by the boosters of one fold in five
    with pytest.warns(UserWarning, match=r"classes at indices \[2\]"):
        want = VIBoostClassifier(5, random_state=0).fit(X, y)
    with pytest.warns(UserWarning, match=r"classes at indices \[2\]"):
        got = DaskVIBoostClassifier(5, random_state=0, client=two_workers).fit(
            da.from_array(X, chunks=(100, 4)), da.from_array(y, chunks=100)
        )
    np.testing.assert_allclose(
        got.decision_function(X), want.decision_function(X), rtol=RTOL, atol=1e-12
    )
    assert np.isnan(got.flip_rates_[2]) and np.isnan(want.flip_rates_[2])
    np.testing.assert_allclose(got.flip_rates_[:2], want.flip_rates_[:2], rtol=RTOL)


def test_unsupported_settings_are_refused(two_workers):
    X, y = _data(200)
    dX, dy = da.from_array(X), da.from_array(y)
    with pytest.raises(ValueError, match="warm_start"):
        DaskVIBoostClassifier(5, preset="paper", warm_start=True, client=two_workers).fit(dX, dy)
    with pytest.raises(ValueError, match="max_bins"):
        DaskVIBoostClassifier(5, max_bins=None, client=two_workers).fit(dX, dy)


def test_a_cluster_without_workers_times_out_with_a_clear_error():
    with (
        distributed.LocalCluster(n_workers=0, processes=False, dashboard_address=None) as cluster,
        distributed.Client(cluster, set_as_default=False) as client,
    ):
        X, y = _data(200)
        start = time.monotonic()
        with pytest.raises(RuntimeError, match="did not finish within timeout=1 s"):
            DaskVIBoostClassifier(5, preset="paper", client=client, timeout=1.0).fit(
                da.from_array(X), da.from_array(y)
            )
        assert time.monotonic() - start < 30


@pytest.mark.timeout(240)
@pytest.mark.parametrize(("transport", "n_rounds"), [("scheduler", 25), ("direct", 120)])
def test_a_worker_restarted_mid_fit_resumes_or_fails_clearly(monkeypatch, transport, n_rounds):
    """Through the scheduler, dask recomputes the lost blocks and the fit goes on; on direct
    connections (fast: more rounds, so that the restart comes mid-fit), the fit warns and runs
    again through the scheduler. Either way the same model, or a clear error."""
    X, y = _data(2000, seed=4)
    want = VIBoostClassifier(n_rounds, preset="paper", random_state=0).fit(X, y)
    rounds = []  # rounds the client has run so far (the fit's booster runs in this process)
    add_round = Booster.add_round

    def counting(booster: Booster) -> None:
        add_round(booster)
        rounds.append(booster.n_rounds)

    monkeypatch.setattr(Booster, "add_round", counting)
    with (
        distributed.LocalCluster(
            n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None
        ) as cluster,
        distributed.Client(cluster, set_as_default=False) as client,
    ):
        model = DaskVIBoostClassifier(
            n_rounds, preset="paper", client=client, random_state=0, block_size=500,
            timeout=120, transport=transport,
        )  # fmt: skip
        outcome: dict = {}

        def fit() -> None:
            with warnings.catch_warnings(record=True) as caught:
                warnings.simplefilter("always")
                try:
                    outcome["model"] = model.fit(
                        da.from_array(X, chunks=700), da.from_array(y, chunks=700)
                    )
                except Exception as error:  # noqa: BLE001 - reported below
                    outcome["error"] = error
            outcome["warnings"] = [str(w.message) for w in caught]

        thread = threading.Thread(target=fit, daemon=True)
        thread.start()
        deadline = time.monotonic() + 120
        while len(rounds) < 5 and time.monotonic() < deadline:
            if not thread.is_alive():
                break
            time.sleep(0.05)
        assert thread.is_alive(), f"the fit ended before a worker could be restarted: {outcome}"
        worker = sorted(client.scheduler_info()["workers"])[0]
        client.restart_workers([worker], timeout=60)
        thread.join(timeout=150)
        assert not thread.is_alive(), "the fit hangs after a worker restart"
    if "error" in outcome:
        assert isinstance(outcome["error"], RuntimeError), outcome["error"]
        assert "worker" in str(outcome["error"])
    else:  # resumed (or run again): the lost blocks were recomputed, the model is the same
        if len(rounds) > n_rounds:  # the restart came mid-fit: it ran again
            assert transport == "direct"
            assert any("through the scheduler" in w for w in outcome["warnings"])
        assert outcome["model"].estimators_ == want.estimators_
        np.testing.assert_allclose(outcome["model"].alphas_, want.alphas_, rtol=RTOL)


def test_defaults_are_the_in_memory_estimators():
    """The same model as in memory needs the same defaults (n_iter_no_change was 100 here
    against 30 in memory)."""
    import inspect

    memory = inspect.signature(VIBoostClassifier.__init__).parameters
    dask = inspect.signature(DaskVIBoostClassifier.__init__).parameters
    assert set(memory) <= set(dask)
    for name, parameter in memory.items():
        assert dask[name].default == parameter.default, name


def test_clone_keeps_the_client_and_the_parameters(two_workers):
    from sklearn.base import clone

    model = DaskVIBoostClassifier(7, preset="paper", client=two_workers, block_size=123)
    copy = clone(model)
    assert copy.client is two_workers
    assert copy.get_params()["block_size"] == 123 and copy.n_estimators == 7
    assert copy is not model


@pytest.mark.filterwarnings("ignore::sklearn.exceptions.ConvergenceWarning")  # few rounds
def test_sample_weights_with_zeros_give_the_in_memory_model(two_workers):
    """Rows of zero weight are in no fold; they get the final ensemble's margin, as in memory."""
    X, y = _data(3000)
    weight = np.random.default_rng(3).integers(0, 4, len(y)).astype(float)
    params = {"n_estimators": 8, "cv": 3, "n_iter_no_change": None, "random_state": 2}
    want = VIBoostClassifier(**params).fit(X, y, sample_weight=weight)
    got = DaskVIBoostClassifier(client=two_workers, block_size=700, **params).fit(
        da.from_array(X, chunks=(450, 2)), da.from_array(y, chunks=450), sample_weight=weight
    )
    _assert_same_model(got, want, X=X)
    np.testing.assert_allclose(
        got.cv_decision_function_.compute(), want.cv_decision_function_, rtol=RTOL
    )


#: The fitted attributes of the posteriors of the true classes.
LABEL_POSTERIORS = ("true_class_proba_", "label_joint_", "noise_matrix_", "noise_channel_")


@pytest.mark.filterwarnings("ignore::sklearn.exceptions.ConvergenceWarning")  # few rounds
@pytest.mark.parametrize(
    "params",
    [
        {"n_estimators": 10, "preset": "paper"},
        {"n_estimators": 10, "preset": "paper", "noise_model": False},
        {"n_estimators": 10, "cv": 2, "n_iter_no_change": None, "max_leaf_nodes": 2},
        {
            "n_estimators": 10,
            "cv": 2,
            "n_iter_no_change": None,
            "max_leaf_nodes": 2,
            "noise_model": False,
        },
    ],
    ids=["in-sample", "in-sample-core", "cross-fit", "cross-fit-core"],
)
def test_two_classes_carry_the_posteriors_of_the_true_classes(two_workers, params):
    """A two-class fit sets ``true_class_proba_`` (a dask array), ``label_joint_``,
    ``noise_matrix_`` and ``noise_channel_`` exactly where the in-memory fit does (every
    two-class fit: NaN joints without the noise model), with its values up to the order of the
    sums; the weights (some zero) make the joint a weighted one."""
    X, y = _data(2000, seed=3)
    rng = np.random.default_rng(4)
    weight = rng.uniform(0.5, 2.0, len(y))
    weight[rng.random(len(y)) < 0.1] = 0.0
    want, got = _fit_weighted_both(two_workers, params, X, y, weight, 450, 500)
    _assert_same_model(got, want)
    assert got.plan_ == want.plan_
    assert got.plan_.noise_fit == ("in-sample" if params.get("preset") == "paper" else "cross-fit")
    assert [hasattr(got, n) for n in LABEL_POSTERIORS] == [
        hasattr(want, n) for n in LABEL_POSTERIORS
    ]
    assert got.noise_channel_ == want.noise_channel_ == "independent"
    rows = got.true_class_proba_
    assert isinstance(rows, da.Array) and rows.chunks == ((450,) * 4 + (200,), (2,))
    np.testing.assert_allclose(rows.compute(), want.true_class_proba_, rtol=RTOL, atol=1e-12)
    for name in ("label_joint_", "noise_matrix_"):
        got_matrix = getattr(got, name)
        assert isinstance(got_matrix, np.ndarray) and got_matrix.shape == (2, 2), name
        np.testing.assert_allclose(got_matrix, getattr(want, name), rtol=RTOL, err_msg=name)
    if params.get("noise_model", True):
        np.testing.assert_allclose(got.label_joint_.sum(), 1.0, rtol=RTOL)
    else:  # the core model: every label true, no joint
        np.testing.assert_array_equal(want.true_class_proba_, np.eye(2)[y])
        assert np.isnan(got.label_joint_).all() and np.isnan(got.noise_matrix_).all()
    local = got.to_local()
    assert isinstance(local.true_class_proba_, np.ndarray)
    np.testing.assert_allclose(
        local.true_class_proba_, want.true_class_proba_, rtol=RTOL, atol=1e-12
    )


def test_bad_categorical_features_are_refused_before_any_work():
    """``categorical_features`` is checked as in memory, before anything is scheduled: names
    need a dataframe, indices must be in range."""
    X = np.column_stack([np.arange(20.0), np.arange(20) % 3])
    y = np.arange(20) % 2
    with pytest.raises(ValueError, match="X has no feature names"):
        DaskVIBoostClassifier(categorical_features=["k"], client=_NoClient()).fit(
            da.from_array(X, chunks=10), da.from_array(y, chunks=10)
        )
    with pytest.raises(ValueError, match="index 5, out of range"):
        DaskVIBoostClassifier(categorical_features=[5], client=_NoClient()).fit(X, y)
